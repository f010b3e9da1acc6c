"""Throwaway directories for a fork's tree, in this user's store in /dev/shm when TMPDIR is unset and it has room (a
few thousand files cost seconds on some disks), else in the temp directory. Each is locked while in use; the next
command removes those a killed one left."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from nemo_rl import locks, store
from nemo_rl.errors import NemoRLError

MEMORY = Path("/dev/shm")
ABANDONED_AFTER_S = 60
MARGIN = 256 * 2**20


def parent(size_hint: int) -> Path:
    """This user's scratch store for a tree of about `size_hint` bytes."""
    name = f"nemo-rl-{os.geteuid()}"
    if not os.environ.get("TMPDIR"):  # guard: scratch-tmpdir-wins
        try:
            free = os.statvfs(MEMORY)
            if os.access(MEMORY, os.W_OK | os.X_OK) and free.f_bavail * free.f_frsize >= size_hint + MARGIN:  # guard: scratch-memory-only-with-room
                return store.open_store(MEMORY / name, str(MEMORY))
        except (OSError, NemoRLError):
            pass  # memory is only faster: a /dev/shm that refuses falls back to the temp directory
    return store.open_store(Path(tempfile.gettempdir()) / name, "TMPDIR")


def remove_abandoned(where: Path) -> None:
    """Remove the scratch directories in the store `where` that no live command holds."""
    now = time.time()
    for entry in where.iterdir():
        try:
            info = entry.lstat()
        except OSError:
            continue
        if now - info.st_mtime > ABANDONED_AFTER_S and not locks.held(entry):  # guard: scratch-a-live-one-is-kept
            shutil.rmtree(entry, ignore_errors=True)


@contextlib.contextmanager
def directory(size_hint: int) -> Iterator[Path]:
    where = parent(size_hint)
    remove_abandoned(where)
    path = Path(tempfile.mkdtemp(dir=where))
    fd = locks.hold(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)
