"""apt-get with a private state directory: downloads .deb files, installs nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.process import run

# the compiler, its headers and libraries, and the CCCL template libraries nvcc's headers include
PACKAGES = ("nvidia-cuda-toolkit", "nvidia-cuda-dev", "libcudart12", "libnvvm4", "libcu++-dev", "libcub-dev",
            "libthrust-dev")
NO_APT = ("apt-get and dpkg-deb are needed to fetch the toolkit's Debian packages",
          "on Debian: `apt-get install apt dpkg`; elsewhere download the .deb files of " + ", ".join(PACKAGES)
          + " (Debian trixie) into one directory and pass it with --debs")


def options(state: Path) -> list[str]:
    """apt-get options that point every file apt reads or writes into `state`."""
    pairs = {  # guard: toolkit-apt-never-reads-the-machine-s
        "Dir::State": state, "Dir::State::Lists": state / "lists", "Dir::State::Status": os.devnull,
        "Dir::Cache": state / "cache", "Dir::Cache::Archives": state / "archives",
        "Dir::Etc::SourceList": os.devnull, "Dir::Etc::SourceParts": state / "parts",
        "Dir::Etc::Preferences": os.devnull, "Dir::Etc::PreferencesParts": state / "preferences",
    }
    args = [arg for key, value in pairs.items() for arg in ("-o", f"{key}={value}")]
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
        remedy=f"check the network and the mirror in /etc/apt/sources.list.d/ (as used: {state / 'parts'})")


def download(state: Path, debs: Path, packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    debs.mkdir(parents=True, exist_ok=True)
    wanted = [name for name in packages if not list(debs.glob(f"{name}_*.deb"))]
    if wanted:
        run(["apt-get", *options(state), "-q", "download", *wanted], cwd=debs, timeout=1800,
            remedy="check the network; `apt-cache policy` with the same options shows which suite offers them")
    return [found for name in packages for found in sorted(debs.glob(f"{name}_*.deb"))[-1:]]


def extract(deb_files: list[Path], root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for deb in deb_files:
        run(["dpkg-deb", "-x", deb, root], timeout=600)


def versions(deb_files: list[Path]) -> dict[str, str]:
    """name -> version, from apt's file names (name_version_arch.deb, ':' escaped as %3a)."""
    fields = (deb.name.removesuffix(".deb").split("_", 2) for deb in deb_files)
    return {name: version.replace("%3a", ":") for name, version, _ in fields}
