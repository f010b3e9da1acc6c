"""apt-get with a private state directory: it reads the package lists of one suite into that directory and
downloads .deb files into another. Nothing is installed, the machine's own lists, status and pins are never read
or written, and no root is needed beyond what apt's download sandbox asks for."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.process import run

# Everything the toolkit's nvcc needs to compile and link a CUDA extension: the compiler (nvcc, cicc via
# libnvvm4, ptxas, fatbinary, nvlink, cudafe++), the headers and libraries (nvidia-cuda-dev), and the C++
# template libraries nvcc's headers include (CCCL: libcu++, CUB, Thrust).
PACKAGES = ("nvidia-cuda-toolkit", "nvidia-cuda-dev", "libcudart12", "libnvvm4", "libcu++-dev", "libcub-dev",
            "libthrust-dev")
NO_APT = ("apt-get and dpkg-deb are needed to fetch the toolkit's Debian packages",
          "on Debian: `apt-get install apt dpkg`; elsewhere download these .deb files from a Debian "
          "trixie mirror (pool/non-free/n/nvidia-cuda-toolkit/ and pool/main/c/cccl/): "
          + ", ".join(PACKAGES) + " and their -dev/lib companions into one directory, and pass it with --debs; "
          "or install NVIDIA's CUDA 12 toolkit and set CUDA_HOME")


def options(state: Path) -> list[str]:
    """apt-get options that point every file apt reads or writes into `state` (sources in state/parts)."""
    pairs = {  # guard: toolkit-apt-never-reads-the-machine-s
        "Dir::State": state, "Dir::State::Lists": state / "lists", "Dir::State::Status": os.devnull,
        "Dir::Cache": state / "cache", "Dir::Cache::Archives": state / "archives",
        "Dir::Etc::SourceList": os.devnull, "Dir::Etc::SourceParts": state / "parts",
        # the machine's pins name its own suites; they must not hold the toolkit's suite back
        "Dir::Etc::Preferences": os.devnull, "Dir::Etc::PreferencesParts": state / "preferences",
    }
    args = []
    for key, value in pairs.items():
        args += ["-o", f"{key}={value}"]
    if os.geteuid() == 0:  # apt's _apt sandbox user cannot write into a root-owned private directory
        args += ["-o", "APT::Sandbox::User=root"]
    return args


def require_tools() -> None:
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        raise NemoRLError(*NO_APT)


def update(state: Path, sources_text: str) -> None:
    for sub in ("lists/partial", "cache", "archives/partial", "parts", "preferences"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "parts" / "toolkit.sources").write_text(sources_text)
    run(["apt-get", *options(state), "-q", "update"], timeout=600,
        remedy="check the network and the mirror in /etc/apt/sources.list.d/ (the same URIs with the toolkit's "
        "suite are in " + str(state / "parts") + ")")


def download(state: Path, debs: Path, packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    """The .deb of each package (already in `debs` from an earlier run, or downloaded now)."""
    debs.mkdir(parents=True, exist_ok=True)
    wanted = [name for name in packages if not list(debs.glob(f"{name}_*.deb"))]
    if wanted:
        run(["apt-get", *options(state), "-q", "download", *wanted], cwd=debs, timeout=1800,
            remedy="check the network; `apt-cache policy` with the same options shows which suite offers them")
    return [found for name in packages for found in sorted(debs.glob(f"{name}_*.deb"))[-1:]] or []


def extract(deb_files: list[Path], root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for deb in deb_files:
        run(["dpkg-deb", "-x", deb, root], timeout=600)


def versions(deb_files: list[Path]) -> dict[str, str]:
    """name -> version, from the file names apt gives them (name_version_arch.deb, ':' escaped as %3a)."""
    result = {}
    for deb in deb_files:
        name, version, _ = deb.name.removesuffix(".deb").split("_", 2)
        result[name] = version.replace("%3a", ":")
    return result
