"""Locked throwaway directories for a fork's tree, in /dev/shm when TMPDIR is unset and it has room."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from nemo_rl import locks

PREFIX = "nemo-rl-scratch-"
MEMORY = Path("/dev/shm")
ABANDONED_AFTER_S = 60
MARGIN = 256 * 2**20


def parent(size_hint: int) -> Path:
    """Where a tree of about `size_hint` bytes goes."""
    if not os.environ.get("TMPDIR"):  # guard: scratch-tmpdir-wins
        try:
            free = os.statvfs(MEMORY)
            if os.access(MEMORY, os.W_OK | os.X_OK) and free.f_bavail * free.f_frsize >= size_hint + MARGIN:  # guard: scratch-memory-only-with-room
                return MEMORY
        except OSError:
            pass
    return Path(tempfile.gettempdir())


def remove_abandoned(where: Path) -> None:
    """Remove this user's scratch directories in `where` that no live command holds."""
    now = time.time()
    for entry in where.glob(f"{PREFIX}*"):
        try:
            info = entry.lstat()
        except OSError:
            continue
        # /tmp is shared: only this user's
        if (entry.is_dir() and not entry.is_symlink() and info.st_uid == os.getuid()  # guard: scratch-a-live-one-is-kept
                and now - info.st_mtime > ABANDONED_AFTER_S and not locks.held(entry)):
            shutil.rmtree(entry, ignore_errors=True)


@contextlib.contextmanager
def directory(size_hint: int) -> Iterator[Path]:
    where = parent(size_hint)
    remove_abandoned(where)
    path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=where))
    fd = locks.hold(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)
