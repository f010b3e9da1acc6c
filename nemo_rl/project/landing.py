"""Atomic writes, and a multi-file change staged away from the project and landed by renames.

A bump prepares pyproject.toml, uv.lock and patches/<dist>/ in a private staging directory inside the
project (same filesystem, so landing is a handful of renames). Before the first rename it writes a
LANDING journal; if the process dies between the first and the last rename (microseconds), the journal
lets `nemo-rl deps recover` finish the landing, and `nemo-rl deps status` says so.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from nemo_rl.errors import NemoRLError

STAGING_ROOT = ".nemo-rl"
JOURNAL = "LANDING.json"


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write through a temporary file in the same directory, then os.replace: readers never see half a file.
    An existing file keeps its mode; a new one gets the mode the user's umask gives (not mkstemp's 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def require_writable(paths: list[Path]) -> None:
    """Refuse before any work when a file or directory the change must replace is not writable by the user."""
    for path in paths:
        # the owner-write bit too: a user who made a file read-only meant it, even when root may still write
        if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o200):
            raise NemoRLError(f"{path} is not writable, so it cannot be changed",
                              f"make it writable (`chmod u+w {path}`) or run where you may write, then try again")


class Staging:
    """A private copy of the files a change touches. Nothing in the project changes until `land()`."""

    def __init__(self, project: Path, files: list[str], directories: list[str], context: list[str] = (),
                 inside: bool = True) -> None:
        self.project = project
        self.files = files  # landed by land()
        self.directories = directories  # landed by land()
        self.context = list(context)  # copied for the tools that run in the staging copy, never landed
        # Inside the project (same filesystem) when it will land by rename; a dry run never lands, so it
        # stages in the system's temporary directory and works in a read-only checkout too.
        root = project / STAGING_ROOT if inside else Path(tempfile.gettempdir())
        root.mkdir(exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=f"staging-{os.getpid()}-" if inside else "nemo-rl-dry-run-",
                                          dir=root))

    def __enter__(self) -> Staging:
        for name in (*self.files, *self.context):
            if (self.project / name).exists():
                shutil.copy2(self.project / name, self.path / name)
        for name in self.directories:
            if (self.project / name).is_dir():
                shutil.copytree(self.project / name, self.path / name, copy_function=shutil.copy2)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if (self.path / JOURNAL).exists():  # interrupted while landing: roll forward, never leave a mix
            finish(self.project, self.path)
        else:
            self.discard()
        return False

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        remove_empty(self.project / STAGING_ROOT)

    def keep_mode(self, name: str) -> None:
        """A tool (uv) rewrote staged `name`: give it back the project file's mode."""
        original = self.project / name
        if original.exists() and (self.path / name).exists():
            os.chmod(self.path / name, original.stat().st_mode & 0o7777)

    def land(self) -> None:
        """Move every staged path into the project: the journal first, then one rename per path."""
        moves = [name for name in (*self.files, *self.directories) if (self.path / name).exists()]
        write_atomic(self.path / JOURNAL, json.dumps({"moves": moves}))
        finish(self.project, self.path)


def finish(project: Path, staging: Path) -> list[str]:
    """Complete a landing whose journal exists; idempotent, so a landing cut short can be run again."""
    moves = json.loads((staging / JOURNAL).read_text())["moves"]
    for name in moves:
        source, target = staging / name, project / name
        if not source.exists():
            continue  # landed before the interruption
        if source.is_dir():
            old = staging / f".old-{Path(name).name}"
            if target.exists():
                shutil.rmtree(old, ignore_errors=True)
                os.replace(target, old)
            target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
    shutil.rmtree(staging, ignore_errors=True)
    remove_empty(project / STAGING_ROOT)
    return moves


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftovers(project: Path) -> list[tuple[Path, bool]]:
    """(staging dir, has a landing journal) for every staging left by a process that no longer runs."""
    root = project / STAGING_ROOT
    found = []
    for path in sorted(root.glob("staging-*")) if root.is_dir() else ():
        pid = path.name.split("-")[1]
        if pid.isdigit() and _pid_alive(int(pid)):
            continue  # a bump in progress
        found.append((path, (path / JOURNAL).exists()))
    return found


def remove_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass
