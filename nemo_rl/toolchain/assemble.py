"""Assemble a CUDA toolkit into a directory from the distribution's packages, and prove it compiles.

The directory ends up as a CUDA_HOME (layout.py) with a stamp naming the packages it came from; a second run
finds the stamp and only verifies. The work (apt's private state, the .deb files, the extracted tree) lives
in DIR/.nemo-rl-cuda/ until the toolkit is verified, then is removed (the arranged files are hard links into
it, so removing it frees nothing the toolkit uses)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import locks, values
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run
from nemo_rl.progress import progress
from nemo_rl.toolchain import apt, archs, layout, sources

STAMP = ".nemo-rl-cuda.json"
WORK = ".nemo-rl-cuda"
STARTED = "started"  # in WORK, written as a run makes it: what marks DIR as a run's own to finish
SUITE = "trixie"  # Debian 13: nvidia-cuda-toolkit 12.4, binaries needing only glibc >= 2.34
COMPONENTS = ("main", "contrib", "non-free")


@dataclass(frozen=True)
class Toolkit:
    home: Path
    nvcc_version: str
    arch: int
    cubins: tuple[int, ...]
    packages: Mapping[str, str]
    reused: bool


def verify(home: Path, arch: int, cuda_major: int) -> tuple[str, tuple[int, ...]]:
    """(nvcc's release, the SMs `cuobjdump --list-elf` lists for a kernel compiled for `arch`)."""
    nvcc = home / "bin" / "nvcc"
    out = run([nvcc, "--version"], timeout=60).stdout
    release = next((line.split("release ", 1)[1].split(",")[0] for line in out.splitlines() if "release " in line),
                   None)
    if release is None or release.split(".")[0] != str(cuda_major):
        raise NemoRLError(f"{nvcc} reports release {release}, not CUDA {cuda_major}: {out.strip()[-200:]}",
                          f"remove {home} and run the command again, with --suite naming a suite that ships "
                          f"CUDA {cuda_major}")
    with tempfile.TemporaryDirectory() as tmp:
        source, obj = Path(tmp) / "probe.cu", Path(tmp) / "probe.o"
        source.write_text("__global__ void probe(float *x) { x[threadIdx.x] *= 2.0f; }\n")
        run([nvcc, "-gencode", f"arch=compute_{arch},code=sm_{arch}", "-c", source, "-o", obj], timeout=300,
            remedy="nvcc needs a host compiler it supports (CUDA 12.4: gcc 6 to 13): install one and set "
            "NVCC_CCBIN to it")
        listed = archs.list_elf_archs(run([home / "bin" / "cuobjdump", "--list-elf", obj], timeout=60).stdout)
    if arch not in listed:
        raise NemoRLError(f"a kernel compiled for sm_{arch} holds cubins for {listed or 'nothing'}",
                          f"remove {home} and assemble it again")
    return release, listed


def _stamp(home: Path) -> dict | None:
    try:
        data = json.loads(values.read_plain_file(home / STAMP))  # guard: reader-the-toolkit-stamp
        return data if isinstance(data, dict) and isinstance(data.get("packages"), dict) else None
    except (OSError, ValueError):
        return None


def _listing(home: Path) -> dict[str, str]:
    return layout.listing(home, (STAMP, STAMP + ".tmp", WORK))


def _damage(home: Path, stamp: dict) -> str | None:
    """What differs from the file list and sizes the stamp recorded (a binary deleted or truncated after the
    assembly), or what a CUDA_HOME needs and lacks whatever the stamp says, in a phrase; None when all is as
    assembled. A same-size change is not seen here (verify's nvcc run is what catches it). A stamp without a
    list is from an older nemo-rl."""
    recorded = stamp.get("files")
    if not isinstance(recorded, dict):
        recorded = {}
    now = _listing(home)
    gone = sorted({*(p for p in recorded if p not in now), *layout.missing(home)})  # guard: toolkit-the-layout-is-checked-whatever
    changed = [p for p in recorded if p in now and now[p] != recorded[p]]  # guard: toolkit-a-changed-size-is-damage
    if not gone and not changed:
        return None
    return "; ".join(part for part in (f"{len(gone)} missing ({', '.join(gone[:3])})" if gone else "",
                                       f"{len(changed)} changed ({', '.join(changed[:3])})" if changed else "") if part)


def assemble(home: Path, *, arch: int = 90, cuda_major: int = 12, suite: str = SUITE,
             components: tuple[str, ...] = COMPONENTS, debs: Path | None = None,
             etc: Path = sources.APT_ETC, os_release: Path = Path("/etc/os-release")) -> Toolkit:
    """Assemble (or verify) the toolkit in `home`, one run per directory at a time: a second waits for the
    first and then finds its stamp."""
    home = home.resolve()  # guard: toolkit-one-lock-however-dir-is-spelled; one lock per directory, however it is spelled
    lock = home.parent / f".{home.name}.toolchain-lock"
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        # beside DIR, never inside it: a directory that is not ours yet is not written to
        fd = locks.open_lock_file(lock, f"another user ran `nemo-rl toolchain cuda` on {home} first, and each run "
                                        "holds its lock: assemble your own toolkit in a directory of yours (`nemo-rl "
                                        "toolchain cuda DIR`), or have that user run it on this directory")
    except OSError as exc:
        raise NemoRLError(f"cannot create the lock file {lock} beside {home}: {exc.strerror or exc}",  # guard: toolkit-the-lock-file-is-named-when-it
                          f"the lock lives in {home.parent}, which must be writable too: name a DIR whose parent "
                          "directory you may write") from exc
    try:
        locks.acquire(fd, lambda: f"another `nemo-rl toolchain cuda` is assembling {home}: waiting for it")  # guard: toolkit-one-run-per-directory-at-a-time
        return _assemble(home, arch, cuda_major, suite, components, debs, etc, os_release)
    finally:
        os.close(fd)


def _left_by_a_run(home: Path) -> bool:
    """Whether `home` is what a run killed half-way left: its work directory, marked as a run marks it, or nothing
    but that directory, empty (a run killed before it marked it)."""
    work = home / WORK
    if not work.is_dir() or work.is_symlink():
        return False
    if (work / STARTED).is_file():  # guard: toolkit-an-unmarked-work-directory-is-not
        return True
    return os.listdir(home) == [WORK] and not os.listdir(work)  # guard: toolkit-a-user-s-empty-work-directory-is-not


def _assemble(home: Path, arch: int, cuda_major: int, suite: str, components: tuple[str, ...], debs: Path | None,
              etc: Path, os_release: Path) -> Toolkit:
    stamp = _stamp(home)
    # a run killed half-way left its work directory: the directory is ours to finish
    if stamp is None and home.exists() and any(home.iterdir()) and not _left_by_a_run(home):  # guard: toolkit-a-foreign-directory-is-refused
        held = sorted(os.listdir(home))
        raise NemoRLError(f"{home} exists and was not made by `nemo-rl toolchain cuda`: it holds "
                          f"{', '.join(held[:5])}{', ...' if len(held) > 5 else ''}"
                          + (f" (its {WORK}/ is not one a run of it left: a run marks the one it makes)"
                             if WORK in held else ""),
                          "name a new directory (or an empty one); nothing in this one is changed")
    damage = _damage(home, stamp) if stamp is not None else "not assembled"  # guard: toolkit-the-stamp-s-file-list-is-checked
    if stamp is not None and damage is None:
        release, listed = verify(home, arch, cuda_major)
        if not isinstance(stamp.get("files"), dict):  # an older stamp: the list is taken once it verifies
            _write_stamp(home, {**stamp, "files": _listing(home)})
        shutil.rmtree(home / WORK, ignore_errors=True)  # guard: toolkit-a-verified-toolkit-loses-a; a killed re-assembly's (about 1 GB)
        return Toolkit(home, release, arch, listed, {str(k): str(v) for k, v in stamp["packages"].items()}, True)
    if stamp is not None:
        progress(f"{home} differs from what was assembled: {damage}; assembling it again")
    work = home / WORK
    work.mkdir(parents=True, exist_ok=True)
    (work / STARTED).write_text("a `nemo-rl toolchain cuda` run started here\n")
    # the work directory first (it marks DIR as ours to finish), then no stamp: a run killed during the
    # assembly leaves a directory that is never taken for an assembled one
    (home / STAMP).unlink(missing_ok=True)  # guard: toolkit-the-stamp-goes-before-a-re
    deb_dir = debs.absolute() if debs else work / "debs"
    if debs is not None:
        # what the user handed over is the whole input: never the network for what it lacks
        absent = [name for name in apt.PACKAGES if not list(deb_dir.glob(f"{name}_*.deb"))]
        if absent:  # guard: toolkit-debs-lacking-a-package-never
            raise NemoRLError(f"--debs {deb_dir} has no .deb of {', '.join(absent)}",
                              f"download {', '.join(absent)} (Debian trixie, the same version as the others) into "
                              f"{deb_dir}, or run without --debs to fetch every package from the machine's mirror")
    if debs is None:
        sources.require_debian(os_release)
        apt.require_tools()
        archive = sources.archive_source(sources.machine_sources(etc), sources.release_codename())
        progress(f"reading the package lists of {suite} from {' '.join(archive.uris)} (private state in {work})")
        apt.update(work / "apt", sources.private_sources(archive, suite, components))
        progress(f"downloading {', '.join(apt.PACKAGES)}")
    elif not shutil.which("dpkg-deb"):
        raise NemoRLError(*apt.NO_APT)
    deb_files = apt.download(work / "apt", deb_dir)
    progress(f"extracting {len(deb_files)} packages")
    root = work / "root"
    shutil.rmtree(root, ignore_errors=True)
    apt.extract(deb_files, root)
    absent = layout.arrange(root, home)
    if absent:
        raise NemoRLError(f"the packages of {suite} lack what a CUDA_HOME needs: {', '.join(absent)}",
                          "name a suite whose nvidia-cuda-toolkit has the whole compiler (--suite)")
    progress(f"verifying {home}: nvcc --version, a kernel for sm_{arch}")
    release, listed = verify(home, arch, cuda_major)
    packages = apt.versions(deb_files)
    _write_stamp(home, {"packages": packages, "nvcc": release, "suite": suite, "files": _listing(home)})
    shutil.rmtree(work, ignore_errors=True)
    return Toolkit(home, release, arch, listed, packages, False)


def _write_stamp(home: Path, data: dict) -> None:
    tmp = home / (STAMP + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, home / STAMP)
