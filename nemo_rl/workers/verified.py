"""What a worker environment's verification proved, recorded in the environment, so that `actor_options` costs
milliseconds once it passed and the imports run again only when the environment changed.

The record holds the inputs the verification compared (uv.lock's digest, the driver's Python and Ray), the
modules it imported, and the state of the files it covered: every directory under site-packages and bin/ (a file
added, removed or renamed anywhere changes its directory's listing), every file the import check loaded (modules
and mapped shared libraries), and the files every start of the interpreter reads: `pyvenv.cfg`, the `.pth` files
and `bin/python*` with what they link to (an edit in place changes a file's mtime; a replaced file, its inode).
A directory's line holds its mode and each link's target in it (a `chmod 777`, a link pointed elsewhere).
`__pycache__` is left out: Python writes it whenever a worker imports something new.

Two digests of that state: `state`, by each directory's listing, is the proof; `stats`, by each directory's own
inode, mtime and ctime, is the fast way to see that no listing can have changed (a directory's ctime moves
with every entry added, removed or renamed in it). Only `stats` is compared first (one `stat` per path); when it
differs (a worker wrote `__pycache__`, which moves its directory's times) the listings are compared and, when they
still hold, `stats` is taken again. A `stats` taken while any path's time was within RACY_NS of the clock is not
kept (a change in the same clock tick would leave the times as they were): the listings decide until it is.
A record that does not read, of the wrong shape or covering less than the environment's top directories and
start-up files counts as no record: the full verification runs and writes a new one.
"""

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
from collections.abc import Sequence
from pathlib import Path

from nemo_rl import codec, extras
from nemo_rl.project import installed
from nemo_rl.project.lockfile import Fork
from nemo_rl.project.model import Project

RECORD = "nemo-rl-verified.json"
RECORD_VERSION = 1
RACY_NS = 2_000_000_000  # a ctime this close to the clock may be followed by a change with the same ctime


@dataclasses.dataclass(frozen=True)
class Record:
    lock_hash: str
    python: str  # the environment's Python, equal to the driver's when it was recorded
    ray: str | None  # the environment's Ray, likewise
    modules: tuple[str, ...]  # what was imported
    dirs: tuple[str, ...]  # relative to the environment
    files: tuple[str, ...]
    state: str
    stats: str | None


def sites(env: Path) -> list[Path]:
    """The site-packages directories, each once: uv's `lib64` is a link to `lib`."""
    seen: dict[Path, Path] = {}
    for site in installed.site_packages_dirs(env):
        seen.setdefault(site.resolve(), site)  # guard: verified-lib64-walked-once
    return sorted(seen.values())


def watched_dirs(env: Path) -> list[str]:
    """Directories whose listing the verification relied on, relative to `env`."""
    found = []
    for top in [env / "bin", *sites(env)]:
        for dirpath, dirnames, _ in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            found.append(os.path.relpath(dirpath, env))
    return found


def startup_files(env: Path) -> list[str]:
    """What every start of the environment's interpreter reads, relative to `env`: an edit in place of these
    changes no directory."""
    found = sites(env)
    return sorted({"pyvenv.cfg", *(os.path.relpath(p, env) for p in (env / "bin").glob("python*")),
                   *(os.path.relpath(p, env) for site in found for p in site.glob("*.pth"))})


def inside(env: Path, paths: list[str]) -> list[str]:
    """The loaded files that belong to the environment, relative to it (the driver's stdlib is not its)."""
    roots = {str(env), str(env.resolve())}
    result = set()
    for path in paths:
        for root in roots:
            if path.startswith(root + os.sep) and "__pycache__" not in path:
                result.add(os.path.relpath(path, root))
    return sorted(result)


def _file_line(relative: str, fd: int) -> tuple[str, int]:
    """A file by its inode, mode, size and mtime; a link by its own and by its target's (`bin/python`); and the
    newest mtime among them. Not a file's ctime: it moves with the link count, and uv links the same cached file
    into every environment it builds (any `uv sync` on the machine would make every record look stale)."""
    try:
        st = os.stat(relative, dir_fd=fd, follow_symlinks=False)
        line = f"{relative} {st.st_ino} {st.st_mode} {st.st_size} {st.st_mtime_ns}"  # guard: verified-a-file-s-link-count-is-not-its
        if not stat.S_ISLNK(st.st_mode):  # guard: verified-a-link-s-target-in-the-state
            return line, st.st_mtime_ns
        try:
            target = os.stat(relative, dir_fd=fd)
        except OSError:  # dangling
            return f"{line} -> {os.readlink(relative, dir_fd=fd)} -", st.st_mtime_ns
        return (f"{line} -> {os.readlink(relative, dir_fd=fd)} {target.st_ino} {target.st_mode} {target.st_size} "
                f"{target.st_mtime_ns}", max(st.st_mtime_ns, target.st_mtime_ns))
    except (OSError, ValueError):  # ValueError: a NUL in a hand-edited path
        return f"{relative} -", 0


@contextlib.contextmanager
def _opened(env: Path):
    fd = os.open(env, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


def _listing(relative: str, fd: int) -> str | None:
    """A directory by its mode and what it lists (a link by its target too); None when it does not read.
    Through a descriptor, not /proc (which a container may not mount)."""
    try:
        dfd = os.open(relative, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    except (OSError, ValueError):  # ValueError: a NUL in a hand-edited path
        return None
    try:
        names = []
        with os.scandir(dfd) as entries:
            for entry in entries:
                # __pycache__ left out: a worker's first import of a package writes `pkg/__pycache__/`, which
                # changes the directory's mtime and nothing that was verified
                if entry.name != "__pycache__":  # guard: verified-bytecode-a-worker-writes-keeps
                    names.append(f"{entry.name} -> {os.readlink(entry.name, dir_fd=dfd)}" if entry.is_symlink()  # guard: a-link-s-target-in-its-directory-s
                                 else entry.name)
        digest = hashlib.sha256(chr(0).join(sorted(names)).encode()).hexdigest()
        return f"{relative}/ {os.fstat(dfd).st_mode} {digest}"  # guard: a-directory-s-mode-in-its-listing
    except OSError:
        return None
    finally:
        os.close(dfd)


def _lines(env: Path, dirs: list[str] | tuple[str, ...], files: list[str] | tuple[str, ...]) -> list[str] | None:
    lines = []
    try:
        with _opened(env) as fd:
            for relative in dirs:
                listing = _listing(relative, fd)
                if listing is None:  # guard: a-listing-that-does-not-read-does-not; a listing that does not read proves nothing: the record does not hold
                    return None
                lines.append(listing)
            lines += [_file_line(relative, fd)[0] for relative in files]
    except OSError:
        return None
    return lines


def state(env: Path, dirs: list[str] | tuple[str, ...], files: list[str] | tuple[str, ...]) -> str | None:
    """The proof's digest: each directory by its mode and what it lists, each file as _file_line says (paths
    relative to the environment's directory); None when any of them does not read."""
    lines = _lines(env, dirs, files)
    return None if lines is None else hashlib.sha256("\n".join(lines).encode()).hexdigest()


def snapshot(env: Path, dirs: list[str]) -> dict[str, str] | None:
    """Each directory's listing and each file's line under them and of the start-up files, by path: taken before
    a check, compared by `write` after it (a file edited while it was checked is not recorded as checked)."""
    files = [*startup_files(env), *(os.path.join(d, n) for d in dirs for n in _names(env / d))]
    lines = _lines(env, dirs, files)
    if lines is None:
        return None
    return dict(zip([*(f"{d}/" for d in dirs), *files], lines, strict=True))


def _names(directory: Path) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return [e.name for e in entries if not e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def stats(env: Path, dirs: list[str] | tuple[str, ...], files: list[str] | tuple[str, ...]) -> str | None:
    """The fast digest: each directory by its inode, mtime and ctime, each file as in `state`; None when a path
    changed too recently (a directory's ctime, a file's mtime) to tell a later change by its times (RACY_NS)."""
    taken = time.time_ns()
    newest = 0
    lines = []
    try:
        with _opened(env) as fd:
            for relative in dirs:
                try:
                    st = os.stat(relative, dir_fd=fd, follow_symlinks=False)
                    newest = max(newest, st.st_ctime_ns)
                    lines.append(f"{relative}/ {st.st_ino} {st.st_mode} {st.st_mtime_ns} {st.st_ctime_ns}")
                except (OSError, ValueError):
                    lines.append(f"{relative}/ -")
            for relative in files:
                line, mtime = _file_line(relative, fd)
                newest = max(newest, mtime)
                lines.append(line)
    except OSError:
        return None
    if newest > taken - RACY_NS:  # guard: verified-racy-times-not-kept
        return None
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _relative(path: object) -> bool:
    return type(path) is str and bool(path) and not path.startswith("/") and "/../" not in f"/{path}/"


@functools.cache
def driver_ray(prefix: str) -> str | None:
    """The driver's Ray: read once per process (a running driver does not change its Ray)."""
    return installed.version(Path(prefix), "ray")


def write(env: Path, project: Project, python: str, ray: str | None, modules: list[str], dirs: list[str],
          files: list[str], before: dict[str, str] | None) -> bool:
    """Record what was checked, unless any of it differs from `before` (snapshot, taken before the check): a
    directory or a file changed while it was checked. Returns whether it was recorded."""
    files = sorted({*files, *startup_files(env)})  # guard: verified-start-up-files-recorded
    quick = stats(env, dirs, files)  # before the listings: a change between the two shows in the next `stats`
    lines = _lines(env, dirs, files)
    if before is None or lines is None:
        return False
    if any(before.get(path) != line for path, line in zip([*(f"{d}/" for d in dirs), *files], lines, strict=True)):  # guard: an-edit-during-the-check-leaves-no
        return False
    _save(env, Record(project.lock_hash, python, ray, tuple(modules), tuple(dirs), tuple(files),
                      hashlib.sha256("\n".join(lines).encode()).hexdigest(), quick))
    return True


def _save(env: Path, record: Record) -> None:
    with contextlib.suppress(OSError):  # an environment we may not write is verified in full each time
        for left in env.glob(f".{RECORD}.*.tmp"):  # a write killed midway; one a minute old is no write going on
            if left.lstat().st_mtime < time.time() - 60:
                left.unlink(missing_ok=True)  # guard: a-killed-record-write-s-temporary-file
        codec.write(env / RECORD, record, RECORD_VERSION)


def read(env: Path) -> Record | None:
    """The record; None when there is none nemo-rl wrote at RECORD_VERSION (verify in full)."""
    record = codec.read(env / RECORD, Record, RECORD_VERSION)  # guard: reader-the-verification-record
    if record is None or not all(map(_relative, (*record.dirs, *record.files))):
        return None  # guard: verified-record-s-shape
    return record


def covers(record: Record, env: Path, project: Project) -> bool:
    """Whether the record covers what any verification of this environment covers: its top directories, the
    start-up files and the modules it must import (a hand-made record listing nothing proves nothing)."""
    tops = {"bin", *(os.path.relpath(p, env) for p in sites(env))}
    needed = modules_to_import(project.forks, env)
    return (tops <= set(record.dirs) and set(startup_files(env)) <= set(record.files)  # guard: verified-a-record-covers-the-top
            and set(needed) <= set(record.modules))


def still_verified(env: Path, project: Project) -> bool:
    """Whether the last verification still holds: same uv.lock, the driver's Python and Ray, and every file and
    directory it covered as it was then."""
    record = read(env)
    if record is None or not covers(record, env, project):  # guard: verified-a-record-s-coverage-checked
        return False
    if record.lock_hash != project.lock_hash:  # guard: verified-uv-lock-compared
        return False
    if record.python != platform.python_version() or record.ray != driver_ray(sys.prefix):  # guard: verified-driver-s-python-and-ray
        return False
    quick = stats(env, record.dirs, record.files)
    if quick is not None and quick == record.stats:  # guard: verified-the-times-decide-when-they-hold
        return True
    held = state(env, record.dirs, record.files)
    if held is None or held != record.state:  # guard: verified-state-compared
        return False
    if quick is not None:  # the listings hold: the times moved for nothing verified (bytecode); keep the new ones
        _save(env, dataclasses.replace(record, stats=quick))  # guard: verified-times-refreshed-after-bytecode
    return True


def forget(env: Path) -> None:
    with contextlib.suppress(OSError):
        (env / RECORD).unlink(missing_ok=True)


def modules_to_import(forks: Sequence[Fork], env: Path) -> list[str]:
    """Ray, and the module nemo-rl uses of each fork the environment has (its fork table's), and of
    transformer-engine when it is there (a compiled extension: what a bundle most needs proven)."""
    present = {f.distribution for f in forks if installed.installed(env, f.distribution)}
    present |= {c.distribution for c in extras.NOT_FORKS
                if c.distribution == "transformer-engine" and installed.installed(env, c.distribution)}  # guard: proof-transformer-engine-imported-by-the
    return ["ray", *(c.module for c in extras.components(forks).values() if c.distribution in present)]
