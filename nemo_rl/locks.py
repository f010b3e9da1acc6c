"""Liveness as a held lock, never a PID (PIDs repeat in containers): a process that owns a directory holds an
exclusive flock on it until it is done, and the kernel drops it however the process dies."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from nemo_rl import interrupt
from nemo_rl.progress import progress

_POLL_S = 0.1  # a blocking flock would be resumed after a signal's handler (PEP 475) and wait on forever


def held(directory: Path) -> bool:
    """Whether a process holds `directory`'s lock now. A shared, non-blocking probe: it never waits, never blocks
    a holder, and two probes do not see each other. A directory that cannot be opened (gone meanwhile, another
    user's) counts as held, so nothing acts on it."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def acquire(fd: int, waiting: Callable[[], str] | None) -> bool:
    """Take `fd`'s exclusive lock: at once when it is free; else, given `waiting`, print what it says and wait;
    without it, return False (the caller refuses or skips)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        if waiting is None:
            return False
    progress(waiting())
    while True:
        interrupt.check()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(_POLL_S)


def hold(directory: Path) -> int:
    """Lock `directory` for as long as the returned descriptor is open (the caller closes it): the mark of a
    directory in use, which `held` sees."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd
