"""What a worker environment's verification proved: a later start checks those files' state instead of importing."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import platform
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

from nemo_rl import codec, extras
from nemo_rl.project import installed
from nemo_rl.project.lockfile import Fork

RECORD = "nemo-rl-verified.json"
RECORD_VERSION = 1
RACY_NS = 2_000_000_000  # a change this close to the clock may leave the times as they were


@dataclasses.dataclass(frozen=True)
class Record:
    lock_hash: str
    python: str  # the environment's, equal to the driver's when recorded
    ray: str | None
    modules: tuple[str, ...]
    dirs: tuple[str, ...]  # relative to the environment
    files: tuple[str, ...]
    state: str  # by each directory's listing: the proof
    stats: str | None  # by each directory's times: the fast way to see that no listing changed


def _spellings(env: Path) -> dict[Path, Path]:
    """Each spelling of a site-packages directory -> the one watched: uv's `lib64` is a link to `lib`."""
    found = installed.site_packages_dirs(env)
    seen: dict[Path, Path] = {}
    for site in found:
        seen.setdefault(site.resolve(), site)  # guard: verified-lib64-walked-once
    return {site: seen[site.resolve()] for site in found}


def sites(env: Path) -> list[Path]:
    """The site-packages directories, each once."""
    return sorted(set(_spellings(env).values()))


def watched_dirs(env: Path) -> list[str]:
    """The directories under bin/ and site-packages, relative to `env`."""
    found = []
    for top in [env / "bin", *sites(env)]:
        relative, skip = os.path.relpath(top, env), len(str(top))  # a relpath per directory costs what the walk does
        for dirpath, dirnames, _ in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            found.append(relative + dirpath[skip:])
    return found


def startup_files(env: Path) -> list[str]:
    """The files every start of the interpreter reads, relative to `env`."""
    return sorted({"pyvenv.cfg", *(os.path.relpath(p, env) for p in (env / "bin").glob("python*")),
                   *(os.path.relpath(p, env) for site in sites(env) for p in site.glob("*.pth"))})


def inside(env: Path, paths: list[str]) -> list[str]:
    """The loaded files that belong to the environment, relative to it, spelled through the watched site-packages."""
    roots = {str(env), str(env.resolve())}
    # a Python whose platlibdir is lib64 loads through uv's lib64 link: the snapshot lists lib
    aliases = {os.path.relpath(spelled, env) + os.sep: os.path.relpath(watched, env) + os.sep
               for spelled, watched in _spellings(env).items()}
    found = set()
    for path in paths:
        for root in roots:
            if path.startswith(root + os.sep) and "__pycache__" not in path:
                relative = os.path.relpath(path, root)
                alias = next((a for a in aliases if relative.startswith(a)), None)
                found.add(relative if alias is None else aliases[alias] + relative[len(alias):])
    return sorted(found)


def _file_line(relative: str, fd: int) -> tuple[str, int]:
    """A file's line and newest mtime (not ctime)."""
    try:
        st = os.stat(relative, dir_fd=fd, follow_symlinks=False)
        line = f"{relative} {st.st_ino} {st.st_mode} {st.st_size} {st.st_mtime_ns}"  # guard: verified-a-file-s-link-count-is-not-its
        if not stat.S_ISLNK(st.st_mode):  # guard: verified-a-link-s-target-in-the-state
            return line, st.st_mtime_ns
        line += f" -> {os.readlink(relative, dir_fd=fd)}"
        try:
            target = os.stat(relative, dir_fd=fd)
        except OSError:
            return f"{line} -", st.st_mtime_ns
        return (f"{line} {target.st_ino} {target.st_mode} {target.st_size} {target.st_mtime_ns}",
                max(st.st_mtime_ns, target.st_mtime_ns))
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return f"{relative} -", 0


def _dir_times(relative: str, fd: int) -> tuple[str, int]:
    try:
        st = os.stat(relative, dir_fd=fd, follow_symlinks=False)
    except (OSError, ValueError):
        return f"{relative}/ -", 0
    return f"{relative}/ {st.st_ino} {st.st_mode} {st.st_mtime_ns} {st.st_ctime_ns}", st.st_ctime_ns


def _listing(relative: str, fd: int) -> tuple[str, int] | None:
    """A directory by its mode and names; None when it does not read."""
    try:
        dfd = os.open(relative, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    except (OSError, ValueError):
        return None
    try:
        names = []
        with os.scandir(dfd) as entries:
            for entry in entries:
                # a worker's first import writes __pycache__/: nothing verified changes
                if entry.name != "__pycache__":  # guard: verified-bytecode-a-worker-writes-keeps
                    names.append(f"{entry.name} -> {os.readlink(entry.name, dir_fd=dfd)}" if entry.is_symlink()  # guard: a-link-s-target-in-its-directory-s
                                 else entry.name)
        return f"{relative}/ {os.fstat(dfd).st_mode} {_digest(sorted(names), chr(0))}", 0  # guard: a-directory-s-mode-in-its-listing
    except OSError:
        return None
    finally:
        os.close(dfd)


def _lines(env: Path, dirs: Sequence[str], files: Sequence[str],
           directory: Callable[[str, int], tuple[str, int] | None] = _listing) -> tuple[list[str], int] | None:
    """Each directory's line, then each file's, and the newest time; None when a directory does not read."""
    try:
        fd = os.open(env, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        found = [directory(relative, fd) for relative in dirs] + [_file_line(relative, fd) for relative in files]
    finally:
        os.close(fd)
    if None in found:  # guard: a-listing-that-does-not-read-does-not
        return None
    pairs = cast("list[tuple[str, int]]", found)
    return [line for line, _ in pairs], max((t for _, t in pairs), default=0)


def _digest(lines: list[str], sep: str = "\n") -> str:
    return hashlib.sha256(sep.join(lines).encode()).hexdigest()


def state(env: Path, dirs: Sequence[str], files: Sequence[str]) -> str | None:
    """The proof's digest of the listings and files; None when a directory does not read."""
    found = _lines(env, dirs, files)
    return None if found is None else _digest(found[0])


def snapshot(env: Path, dirs: list[str]) -> dict[str, str] | None:
    """The lines of `dirs`, their files and the start-up files, by path, for `write` to compare."""
    files = [*startup_files(env)]
    for d in dirs:
        with contextlib.suppress(OSError), os.scandir(env / d) as entries:
            files += [os.path.join(d, e.name) for e in entries if not e.is_dir(follow_symlinks=False)]
    found = _lines(env, dirs, files)
    return None if found is None else dict(zip([*(f"{d}/" for d in dirs), *files], found[0], strict=True))


def stats(env: Path, dirs: Sequence[str], files: Sequence[str]) -> str | None:
    """The fast digest, by each directory's inode and times; None when a time is within RACY_NS of the clock."""
    taken = time.time_ns()
    found = _lines(env, dirs, files, _dir_times)
    if found is None or found[1] > taken - RACY_NS:  # guard: verified-racy-times-not-kept
        return None
    return _digest(found[0])


@functools.cache
def driver_ray(prefix: str) -> str | None:
    return installed.version(Path(prefix), "ray")


def write(env: Path, lock_hash: str, python: str, ray: str | None, modules: list[str], dirs: list[str],
          files: list[str], before: dict[str, str] | None) -> bool:
    """Record the check unless anything differs from `before` (a `snapshot`); True when recorded."""
    files = sorted({*files, *startup_files(env)})  # guard: verified-start-up-files-recorded
    quick = stats(env, dirs, files)  # first: a change between the two shows in the next `stats`
    found = _lines(env, dirs, files)
    if before is None or found is None:
        return False
    if any(before.get(path) != line for path, line in zip([*(f"{d}/" for d in dirs), *files], found[0], strict=True)):  # guard: an-edit-during-the-check-leaves-no
        return False
    _save(env, Record(lock_hash, python, ray, tuple(modules), tuple(dirs), tuple(files), _digest(found[0]), quick))
    return True


def _save(env: Path, record: Record) -> None:
    with contextlib.suppress(OSError):  # an environment we may not write is verified in full each time
        for left in env.glob(f".{RECORD}.*.tmp"):  # a minute old: a killed write's
            if left.lstat().st_mtime < time.time() - 60:
                left.unlink(missing_ok=True)  # guard: a-killed-record-write-s-temporary-file
        codec.write(env / RECORD, record, RECORD_VERSION)


def read(env: Path) -> Record | None:
    record = codec.read(env / RECORD, Record, RECORD_VERSION)  # guard: reader-the-verification-record
    return record


def modules_to_import(forks: Sequence[Fork], env: Path) -> list[str]:
    return extras.modules_to_import(forks, installed.site_packages(env))


def covers(record: Record, env: Path, needed: Sequence[str]) -> bool:
    """Whether the record covers the top directories, the start-up files and `needed`."""
    tops = {"bin", *(os.path.relpath(p, env) for p in sites(env))}
    return (tops <= set(record.dirs) and set(startup_files(env)) <= set(record.files)  # guard: verified-a-record-covers-the-top
            and set(needed) <= set(record.modules))


def still_verified(env: Path, lock_hash: str, modules: Sequence[str]) -> bool:
    """Whether the last verification holds: same uv.lock, driver's Python, Ray and files; `modules` imported."""
    record = read(env)
    if record is None or not covers(record, env, modules):  # guard: verified-a-record-s-coverage-checked
        return False
    if record.lock_hash != lock_hash:  # guard: verified-uv-lock-compared
        return False
    if record.python != platform.python_version() or record.ray != driver_ray(sys.prefix):  # guard: verified-driver-s-python-and-ray
        return False
    quick = stats(env, record.dirs, record.files)
    if quick is not None and quick == record.stats:  # guard: verified-the-times-decide-when-they-hold
        return True
    held = state(env, record.dirs, record.files)
    if held is None or held != record.state:  # guard: verified-state-compared
        return False
    if quick is not None:  # the times moved for nothing verified (bytecode): keep the new ones
        _save(env, dataclasses.replace(record, stats=quick))  # guard: verified-times-refreshed-after-bytecode
    return True


def forget(env: Path) -> None:
    with contextlib.suppress(OSError):
        (env / RECORD).unlink(missing_ok=True)
