"""What a worker environment's verification proved, recorded in the environment, so that `actor_options` costs
milliseconds once it passed and the imports run again only when the environment changed.

The record holds the inputs the verification compared (uv.lock's digest, the driver's Python and Ray) and the
state of the files it covered: every directory under site-packages and bin/ (a file added, removed or renamed
anywhere changes its directory's listing) and every file the import check loaded, modules and mapped shared libraries
(an edit in place changes the file's size, mtime or ctime; ctime cannot be set back by hand). `__pycache__` is
left out: Python writes it whenever a worker imports something new. A record that does not read, or of the
wrong shape, counts as no record: the full verification runs and writes a new one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import extras
from nemo_rl.project import installed, landing, lockfile

RECORD = "nemo-rl-verified.json"


@dataclass(frozen=True)
class Record:
    lock_hash: str
    python: str  # the environment's Python, equal to the driver's when it was recorded
    ray: str | None  # the environment's Ray, likewise
    dirs: tuple[str, ...]  # relative to the environment
    files: tuple[str, ...]
    state: str


def watched_dirs(env: Path) -> list[str]:
    """Directories whose listing the verification relied on, relative to `env`."""
    found = []
    for top in [env / "bin", *installed.site_packages_dirs(env)]:
        for dirpath, dirnames, _ in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            found.append(os.path.relpath(dirpath, env))
    return found


def inside(env: Path, paths: list[str]) -> list[str]:
    """The loaded files that belong to the environment, relative to it (the driver's stdlib is not its)."""
    roots = {str(env), str(env.resolve())}
    result = set()
    for path in paths:
        for root in roots:
            if path.startswith(root + os.sep) and "__pycache__" not in path:
                result.add(os.path.relpath(path, root))
    return sorted(result)


def state(env: Path, dirs: list[str] | tuple[str, ...], files: list[str] | tuple[str, ...]) -> str:
    """A digest of each path's inode, size, mtime and ctime (stat relative to the environment's directory: a few
    thousand of them in milliseconds)."""
    lines = []
    try:
        fd = os.open(env, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return "no environment"
    try:
        for relative in dirs:
            # a directory by what it lists, __pycache__ left out: a worker's first import of a package writes
            # `pkg/__pycache__/`, which changes the directory's mtime and nothing that was verified
            try:
                names = sorted(n for n in os.listdir(os.path.join(f"/proc/self/fd/{fd}", relative))
                               if n != "__pycache__")
                lines.append(f"{relative}/ {hashlib.sha256(chr(0).join(names).encode()).hexdigest()}")
            except (OSError, ValueError):
                lines.append(f"{relative}/ -")
        for relative in files:
            try:
                st = os.stat(relative, dir_fd=fd)
                lines.append(f"{relative} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}")
            except (OSError, ValueError):  # ValueError: a NUL in a hand-edited path
                lines.append(f"{relative} -")
    finally:
        os.close(fd)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _relative(path: object) -> bool:
    return type(path) is str and bool(path) and not path.startswith("/") and "/../" not in f"/{path}/"


@functools.cache
def driver_ray(prefix: str) -> str | None:
    """The driver's Ray: read once per process (a running driver does not change its Ray)."""
    return installed.installed(Path(prefix), "ray")[1]


def write(env: Path, project: Path, python: str, ray: str | None, dirs: list[str], files: list[str]) -> None:
    record = {"lock_hash": lockfile.lock_hash(project), "python": python, "ray": ray, "dirs": dirs,
              "files": files, "state": state(env, dirs, files)}
    with contextlib.suppress(OSError):  # an environment we may not write is verified in full each time
        landing.write_atomic(env / RECORD, json.dumps(record))


def read(env: Path) -> Record | None:
    try:
        data = json.loads((env / RECORD).read_text())
        strings = ("lock_hash", "python", "state")
        if (not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in strings)
                or not isinstance(data.get("ray"), str | None)
                or not all(isinstance(data.get(k), list) and all(map(_relative, data[k])) for k in ("dirs", "files"))):
            return None
        return Record(data["lock_hash"], data["python"], data["ray"], tuple(data["dirs"]), tuple(data["files"]),
                      data["state"])
    except (OSError, ValueError, RecursionError):  # not a record we wrote: verify in full
        return None


def still_verified(env: Path, project: Path) -> bool:
    """Whether the last verification still holds: same uv.lock, the driver's Python and Ray, and every file and
    directory it covered as it was then."""
    record = read(env)
    if record is None:
        return False
    if record.lock_hash != lockfile.lock_hash(project):
        return False
    if record.python != platform.python_version() or record.ray != driver_ray(sys.prefix):
        return False
    return state(env, record.dirs, record.files) == record.state


def forget(env: Path) -> None:
    with contextlib.suppress(OSError):
        (env / RECORD).unlink(missing_ok=True)


def modules_to_import(forks: list[lockfile.Fork], env: Path) -> list[str]:
    """Ray, and the module nemo-rl uses of each fork the environment has (the component table's), and of
    transformer-engine when it is there (a compiled extension: what a bundle most needs proven)."""
    present = {f.distribution for f in forks if installed.installed(env, f.distribution)[0]}
    present |= {c.distribution for c in extras.COMPONENTS.values()
                if c.distribution == "transformer-engine" and installed.installed(env, c.distribution)[0]}
    return ["ray", *(c.module for c in extras.COMPONENTS.values() if c.distribution in present)]
