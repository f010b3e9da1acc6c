"""Where tests/check_mutations.py works, and what it shares with other runners on the machine: one directory per
run (its snapshot and each row's copy), held by a lock for the run's life, so the next runner removes what a
killed one left (its copies, and the pytest runs it started, which carry the directory in their environment);
and the machine itself, which rows of the Ray, signal and bundle tests hold alone, against every runner of this
user, not only against their own."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from nemo_rl import locks
from nemo_rl.errors import NemoRLError

# Every pytest run a runner starts, and what it starts in turn, carries its run directory under this name: what a
# killed runner left running is found by it, wherever it went (a test's chdir), and nothing else is.
MARK = "NEMO_RL_MUTATION_RUN"
RUN_PREFIX = "nemo-rl-mutation-run-"
MAKING_PREFIX = ".nemo-rl-mutation-making-"  # a run directory until its lock is held: no runner judges it
OWNER = "owner.lock"
# A run directory without its owner file is none a runner made, unless older than this: then it is what is left
# of one (its owner file removed by hand, say).
UNOWNED_GRACE_S = 60
_POLL_S = 0.2  # how often a row waiting for the machine looks at STOPPING


class Stopped(Exception):
    """The runner was interrupted: no new pytest run starts, and no row waits for the machine any longer."""


STOPPING = threading.Event()


def mark(where: Path) -> str:
    return os.path.realpath(where)


def run_dir_of(path: Path) -> Path | None:
    """The run directory `path` (a row's copy) lies in, or None (a copy made outside a run)."""
    return next((p for p in (path, *path.parents) if p.name.startswith(RUN_PREFIX)), None)


def claim_run_dir(parent: Path | None = None) -> tuple[Path, int]:
    """A new run directory under `parent` (the temporary directory), and the descriptor that holds it: the lock
    goes with the process, SIGKILL included. What killed runners left there is removed first."""
    parent = Path(parent or tempfile.gettempdir())
    clear_abandoned(parent)
    made = Path(tempfile.mkdtemp(prefix=MAKING_PREFIX, dir=parent))
    fd = locks.open_lock_file(made / OWNER)
    fcntl.flock(fd, fcntl.LOCK_EX)
    where = parent / (RUN_PREFIX + made.name.removeprefix(MAKING_PREFIX))
    try:
        os.rename(made, where)  # under the name other runners look at only once it is held
    except FileNotFoundError:  # stopped (Ctrl-Z) past UNOWNED_GRACE_S, and cleared away meanwhile: again
        os.close(fd)
        return claim_run_dir(parent)
    return where, fd


def release_run_dir(where: Path, fd: int) -> None:
    shutil.rmtree(where, ignore_errors=True)
    os.close(fd)


def clear_abandoned(parent: Path) -> list[Path]:
    """Remove the run directories of runners that are gone (their lock is free), after ending what still works in
    them; only this user's real directories, never through a link. Returns what was removed."""
    removed = []
    making = sorted(parent.glob(MAKING_PREFIX + "*"))  # a runner killed before its directory was held
    for path in sorted(parent.glob(RUN_PREFIX + "*")) + making:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        if path in making and time.time() - info.st_mtime < UNOWNED_GRACE_S:  # perhaps being held this moment
            continue
        try:  # never made here: a runner's own is there from the start, and a link is never followed
            fd: int | None = os.open(path / OWNER, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            if time.time() - info.st_mtime < UNOWNED_GRACE_S:
                continue
            fd = None
        except OSError:  # a link or a directory there: nothing a runner makes, so nothing to judge by
            print(f"warning: {path} is left as it is: its {OWNER} is no plain file", file=sys.stderr, flush=True)
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
    """SIGKILL to the process group of each process that carries `path` as its run directory (a killed runner's
    pytest runs, each the leader of its group, and what they started); never to the caller's own group, nor to
    a process that only stands in the directory (a shell looking at what was left)."""
    wanted = f"{MARK}={mark(path)}".encode()
    ours = os.getpgrp()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            group = os.getpgid(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
        # group 0 or 1 is the kernel's or init's (and killpg(0) would mean the caller's own group)
        if wanted in environ and group > 1 and group != ours:
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)


def machine_lock_path() -> Path:
    """In /tmp itself, whatever TMPDIR says: the machine is the same for runners with other temporary directories."""
    return Path("/tmp") / f"nemo-rl-mutation-machine-{os.geteuid()}.lock"


def _flock_unless_stopped(fd: int, how: int) -> None:
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if STOPPING.is_set():
                raise Stopped from None
            time.sleep(_POLL_S)


@contextlib.contextmanager
def machine_share(alone: bool, path: Path | None = None) -> Iterator[None]:
    """Hold the machine for one row: alone (exclusive) for the Ray, signal and bundle rows, shared for the rest,
    against every runner of this user. A gate taken first keeps an alone row from waiting behind shared rows that
    keep coming (a runner with --jobs 2): while it waits, no new row starts. A wait ends when the runner is
    interrupted. A lock that cannot be had (a file another user planted) is a warning: the row still runs."""
    path = path or machine_lock_path()
    gate_path = path.with_name(path.name + ".gate")
    fix = f"remove {path} and {gate_path} (they are made again), and find out who made them"
    try:
        gate = locks.open_lock_file(gate_path, not_yours=fix)
        try:
            fd = locks.open_lock_file(path, not_yours=fix)
        except BaseException:
            os.close(gate)
            raise
    except (OSError, NemoRLError) as exc:
        print(f"warning: rows run beside other runners' rows: {exc}", file=sys.stderr, flush=True)
        yield
        return
    try:
        try:
            _flock_unless_stopped(gate, fcntl.LOCK_EX)
            _flock_unless_stopped(fd, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            os.close(gate)
        yield
    finally:
        os.close(fd)  # one descriptor per row: flock's lock belongs to it, not to the thread
