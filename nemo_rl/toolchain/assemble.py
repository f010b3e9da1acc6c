"""Assemble a CUDA toolkit into DIR from Debian's packages and prove it compiles; a stamped DIR is only verified.

DIR is written only when new or empty, taken by this user's run, or holding only the files its stamp lists."""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import codec, locks, values
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run
from nemo_rl.progress import progress
from nemo_rl.toolchain import apt, archs, layout, sources

STAMP = ".nemo-rl-cuda.json"
STAMP_VERSION = 1
WORK = ".nemo-rl-cuda"
TAKEN = "taken"  # in WORK: the token the user's record names, so a new directory at a reused inode is not taken
TAKEN_VERSION = 1
SUITE = "trixie"  # Debian 13: nvidia-cuda-toolkit 12.4, binaries needing only glibc >= 2.34
COMPONENTS = ("main", "contrib", "non-free")


@dataclass(frozen=True)
class Stamp:
    packages: dict[str, str]
    nvcc: str
    suite: str
    files: dict[str, str]  # path -> size or link target, to see a binary deleted or truncated later


@dataclass(frozen=True)
class Taken:
    """A DIR a run took: its inode and the token in DIR/.nemo-rl-cuda/."""
    path: str
    device: int
    inode: int
    token: str


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
                          f"remove {home} and run again with a --suite that ships CUDA {cuda_major}")
    with tempfile.TemporaryDirectory() as tmp:
        source, obj = Path(tmp) / "probe.cu", Path(tmp) / "probe.o"
        source.write_text("__global__ void probe(float *x) { x[threadIdx.x] *= 2.0f; }\n")
        run([nvcc, "-gencode", f"arch=compute_{arch},code=sm_{arch}", "-c", source, "-o", obj], timeout=300,
            remedy="install a host compiler nvcc supports (CUDA 12.4: gcc 6 to 13) and set NVCC_CCBIN to it")
        listed = archs.list_elf_archs(run([home / "bin" / "cuobjdump", "--list-elf", obj], timeout=60).stdout)
    if arch not in listed:
        raise NemoRLError(f"a kernel compiled for sm_{arch} holds cubins for {listed or 'nothing'}",
                          f"remove {home} and assemble it again")
    return release, listed


def read_stamp(home: Path) -> Stamp | None:
    return codec.read(home / STAMP, Stamp, STAMP_VERSION)


def _listing(home: Path) -> dict[str, str]:
    return layout.listing(home, (STAMP, WORK))


def _damage(home: Path, stamp: Stamp) -> str | None:
    now = _listing(home)
    gone = sorted({*(p for p in stamp.files if p not in now), *layout.missing(home)})  # guard: toolkit-the-layout-is-checked-whatever
    changed = [p for p in stamp.files if p in now and now[p] != stamp.files[p]]  # guard: toolkit-a-changed-size-is-damage
    parts = ([f"{len(gone)} missing ({', '.join(gone[:3])})"] if gone else []) + (
        [f"{len(changed)} changed ({', '.join(changed[:3])})"] if changed else [])
    return "; ".join(parts) or None


def assemble(home: Path, *, arch: int = 90, cuda_major: int = 12, suite: str = SUITE,
             components: tuple[str, ...] = COMPONENTS, debs: Path | None = None,
             etc: Path = sources.APT_ETC, os_release: Path = Path("/etc/os-release")) -> Toolkit:
    """Assemble (or verify) the toolkit in `home`; one run per directory at a time."""
    home = home.resolve()  # guard: toolkit-one-lock-however-dir-is-spelled
    lock = home.parent / f".{home.name}.toolchain-lock"  # beside DIR: a directory not ours yet is not written to
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        fd = locks.open_lock_file(lock, f"another user holds the lock of {home}: assemble your own with "
                                        "`uv run nemo-rl toolchain cuda DIR` in another DIR")
    except OSError as exc:
        raise NemoRLError(f"cannot create the lock file {lock} beside {home}: {exc.strerror or exc}",  # guard: toolkit-the-lock-file-is-named-when-it
                          f"the lock lives in {home.parent}: name a DIR in a directory you may write") from exc
    try:
        locks.acquire(fd, lambda: f"another `nemo-rl toolchain cuda` is assembling {home}: waiting for it")  # guard: toolkit-one-run-per-directory-at-a-time
        return _assemble(home, arch, cuda_major, suite, components, debs, etc, os_release)
    finally:
        os.close(fd)


def _taken_record(home: Path) -> Path:
    from nemo_rl import settings

    return settings.private_dir("toolchain") / f"{hashlib.sha256(str(home).encode()).hexdigest()[:32]}.json"


def _take(home: Path) -> None:
    from nemo_rl.project import state_dir

    (home / WORK).mkdir(parents=True, exist_ok=True)
    info, token = os.lstat(home), secrets.token_hex(16)
    codec.write(_taken_record(home), Taken(str(home), info.st_dev, info.st_ino, token), TAKEN_VERSION)
    # replaces a link a copy brought, never writes through it
    state_dir.write_atomic(home / WORK / TAKEN, token)  # guard: toolkit-the-token-replaces-a-link-never-follows-it


def _clear_work(home: Path) -> None:
    work = home / WORK
    for name in os.listdir(work) if work.is_dir() and not work.is_symlink() else []:
        path = work / name
        if name == TAKEN:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()


def _taken(home: Path) -> bool:
    record = codec.read(_taken_record(home), Taken, TAKEN_VERSION)
    info = os.lstat(home)
    try:
        token = values.read_plain_file(home / WORK / TAKEN, 64).decode(errors="replace")
    except OSError:
        return False
    return record == Taken(str(home), info.st_dev, info.st_ino, token)  # guard: toolkit-an-unmarked-work-directory-is-not


def _foreign(home: Path, stamp: Stamp | None) -> list[str]:
    """What in `home` makes it not ours to write."""
    if not home.exists() or not os.listdir(home):  # guard: toolkit-a-user-s-empty-work-directory-is-not
        return []
    if _taken(home):  # guard: toolkit-a-stamp-of-another-version-is-rebuilt
        return []
    # not taken: a stamp vouches for the files it lists, and nothing vouches for a work directory or another stamp
    listed = stamp.files if stamp is not None else {}
    work = home / WORK
    marks = [STAMP] if stamp is None and (home / STAMP).exists() else []
    if work.is_symlink() or work.exists() and (not work.is_dir() or set(os.listdir(work)) - {TAKEN}):  # guard: toolkit-a-work-directory-holding-files-is-foreign
        marks.insert(0, f"{WORK}/")
    return marks + [path for path in _listing(home) if path not in listed]  # guard: toolkit-a-stamp-vouches-only-for-its-files


def _assemble(home: Path, arch: int, cuda_major: int, suite: str, components: tuple[str, ...], debs: Path | None,
              etc: Path, os_release: Path) -> Toolkit:
    stamp = read_stamp(home)
    foreign = _foreign(home, stamp)
    if foreign:  # guard: toolkit-a-foreign-directory-is-refused
        held = sorted(os.listdir(home))
        raise NemoRLError(f"{home} exists and was not made by `nemo-rl toolchain cuda`: it holds "
                          f"{', '.join(held[:5])}{', ...' if len(held) > 5 else ''} (no stamp lists "
                          f"{', '.join(foreign[:3])})", "name a new or empty directory")
    damage = _damage(home, stamp) if stamp is not None else "not assembled"  # guard: toolkit-the-stamp-s-file-list-is-checked
    if stamp is not None and damage is None:
        release, listed = verify(home, arch, cuda_major)
        _clear_work(home)  # guard: toolkit-a-verified-toolkit-loses-a
        return Toolkit(home, release, arch, listed, stamp.packages, True)
    if stamp is not None:
        progress(f"{home} differs from what was assembled: {damage}; assembling it again")
    work = home / WORK
    deb_dir = debs.absolute() if debs else work / "debs"
    # the inputs first: a run that cannot start neither takes nor writes DIR
    if debs is not None:
        absent = [name for name in apt.PACKAGES if not list(deb_dir.glob(f"{name}_*.deb"))]
        if absent:  # guard: toolkit-debs-lacking-a-package-never
            raise NemoRLError(f"--debs {deb_dir} has no .deb of {', '.join(absent)}",
                              f"download them (Debian trixie) into {deb_dir}, or run without --debs")
        if not shutil.which("dpkg-deb"):
            raise NemoRLError(*apt.NO_APT)
    else:
        codename = sources.require_debian(os_release)
        apt.require_tools()
        archive = sources.archive_source(sources.machine_sources(etc), codename)
    _take(home)
    # taken first, then no stamp: a killed run never leaves a half-made tree that looks assembled
    (home / STAMP).unlink(missing_ok=True)  # guard: toolkit-the-stamp-goes-before-a-re
    if debs is None:
        progress(f"reading the package lists of {suite} from {' '.join(archive.uris)}")
        apt.update(work / "apt", sources.private_sources(archive, suite, components))
        progress(f"downloading {', '.join(apt.PACKAGES)}")
    deb_files = apt.download(work / "apt", deb_dir)
    progress(f"extracting {len(deb_files)} packages")
    root = work / "root"
    shutil.rmtree(root, ignore_errors=True)
    apt.extract(deb_files, root)
    absent = layout.arrange(root, home)
    if absent:
        raise NemoRLError(f"the packages of {suite} lack what a CUDA_HOME needs: {', '.join(absent)}",
                          "pass a --suite whose nvidia-cuda-toolkit has the whole compiler")
    progress(f"verifying {home}: nvcc --version, a kernel for sm_{arch}")
    release, listed = verify(home, arch, cuda_major)
    packages = apt.versions(deb_files)
    codec.write(home / STAMP, Stamp(packages, release, suite, _listing(home)), STAMP_VERSION)
    _clear_work(home)
    return Toolkit(home, release, arch, listed, packages, False)
