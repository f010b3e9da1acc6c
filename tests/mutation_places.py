"""Where tests/check_mutations.py works, and what it shares with other runners on the machine: one directory per
run (its snapshot and each row's copy), held by a lock for the run's life, so the next runner removes what a
killed one left (its copies, and the pytest runs still working in them); and the machine itself, which rows of
the Ray and signal tests hold alone, against every runner of this user, not only against their own."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from nemo_rl import locks
from nemo_rl.errors import NemoRLError

RUN_PREFIX = "nemo-rl-mutation-run-"
MAKING_PREFIX = ".nemo-rl-mutation-making-"  # a run directory until its lock is held: no runner judges it
OWNER = "owner.lock"
# A run directory without its owner file is none a runner made, unless older than this: then it is what is left
# of one (its owner file removed by hand, say).
UNOWNED_GRACE_S = 60


def claim_run_dir(parent: Path | None = None) -> tuple[Path, int]:
    """A new run directory under `parent` (the temporary directory), and the descriptor that holds it: the lock
    goes with the process, SIGKILL included. What killed runners left there is removed first."""
    parent = Path(parent or tempfile.gettempdir())
    clear_abandoned(parent)
    made = Path(tempfile.mkdtemp(prefix=MAKING_PREFIX, dir=parent))
    fd = locks.open_lock_file(made / OWNER)
    fcntl.flock(fd, fcntl.LOCK_EX)
    where = parent / (RUN_PREFIX + made.name.removeprefix(MAKING_PREFIX))
    os.rename(made, where)  # under the name other runners look at only once it is held
    return where, fd


def release_run_dir(where: Path, fd: int) -> None:
    shutil.rmtree(where, ignore_errors=True)
    os.close(fd)


def clear_abandoned(parent: Path) -> list[Path]:
    """Remove the run directories of runners that are gone (their lock is free), after ending what still works in
    them; only this user's real directories, never through a link. Returns what was removed."""
    removed = []
    for path in sorted(parent.glob(RUN_PREFIX + "*")):
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        try:  # never made here: a runner's own is there from the start, and a link is never followed
            fd: int | None = os.open(path / OWNER, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            if time.time() - info.st_mtime < UNOWNED_GRACE_S:
                continue
            fd = None
        except OSError:  # not ours to judge
            continue
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # its runner is alive
                    continue
            end_work_inside(path)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
            print(f"removed {path}, left by a mutation runner that was killed", file=sys.stderr, flush=True)
        finally:
            if fd is not None:
                os.close(fd)
    return removed


def end_work_inside(path: Path) -> None:
    """SIGKILL to the process group of each of this user's processes working in `path` (a killed runner's pytest
    runs, each the leader of its group, and Ray's processes in it); never to the caller's own group."""
    inside = str(path.resolve())
    ours = os.getpgrp()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            group = os.getpgid(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
        # group 0 or 1 is the kernel's or init's (and killpg(0) would mean the caller's own group)
        if (cwd == inside or cwd.startswith(inside + os.sep)) and group > 1 and group != ours:
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)


def machine_lock_path() -> Path:
    return Path(tempfile.gettempdir()) / f"nemo-rl-mutation-machine-{os.geteuid()}.lock"


@contextlib.contextmanager
def machine_share(alone: bool, path: Path | None = None) -> Iterator[None]:
    """Hold the machine for one row: alone (exclusive) for the Ray and signal rows, shared for the rest, against
    every runner of this user. A lock that cannot be had (a planted file) is a warning: the row still runs."""
    try:
        fd = locks.open_lock_file(path or machine_lock_path())
    except (OSError, NemoRLError) as exc:
        print(f"warning: rows run beside other runners' rows: {exc}", file=sys.stderr, flush=True)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # one descriptor per row: flock's lock belongs to it, not to the thread
