"""The one runner for external commands. Nothing else in nemo_rl calls subprocess.

Every child starts a session of its own (so a Ctrl-C at the terminal reaches nemo-rl alone, uv's build backends
can be ended with the uv that started them, and no child waits on the terminal), with no Python code run between
fork and exec. No thread
starts a child: a command that waits on two things starts both children and collects them in turn (`start`).
A wait notices an interruption (nemo_rl.interrupt) within _SLICE_S, ends the child's group and unwinds; a child
that exits takes what it left running in its group with it. A watchdog
process ends the groups still registered when nemo-rl itself dies, SIGKILL included, so no `uv lock` or build
backend lives on to rewrite files after nemo-rl has exited.
"""

from __future__ import annotations

import os
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from nemo_rl import interrupt, values
from nemo_rl.errors import NemoRLError
from nemo_rl.process_output import STREAM_KEPT, Kept, Result, describe_failure, full_disk, to_stderr

GRACE_S = 2.0  # between SIGTERM and SIGKILL for a group being ended: the whole command must end within 5 s
_SLICE_S = 0.2  # how often a wait looks at the interruption flag
# Once the child itself has exited, its pipes are read this much longer: what it wrote is in the pipe already,
# and a process that left its group (setsid) but kept the pipes open is not waited on.
AFTER_EXIT_S = 0.5


# The watchdog reads "+PGID" / "-PGID" lines; at end of input (nemo-rl exited, however) it ends what is left: SIGTERM
# first, so git removes its lock files, then SIGKILL. A group is removed only after its leader was reaped, so the
# number cannot have been reused yet. It is told of a group just after the child starts: a SIGKILL within those
# microseconds leaves that one child.
_WATCHDOG = """
import os, signal, sys, time
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
groups = set()
for line in sys.stdin:
    (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
for number, signum in enumerate((signal.SIGTERM, signal.SIGKILL) if groups else ()):
    time.sleep(number)
    for group in groups:
        try:
            os.killpg(group, signum)
        except OSError:
            pass
"""
_watchdogs: dict[int, subprocess.Popen] = {}  # by the pid of the process it watches (a fork gets its own)


def _tell_watchdog(line: str) -> None:
    owner = os.getpid()
    try:
        watchdog = _watchdogs.get(owner)
        if watchdog is None or watchdog.poll() is not None:
            watchdog = _watchdogs[owner] = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, text=True)
        if watchdog.stdin is not None:
            watchdog.stdin.write(line + "\n")
            watchdog.stdin.flush()
    except (OSError, ValueError):  # no watchdog: children still end on every signal nemo-rl sees
        _watchdogs.pop(owner, None)


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _end_groups(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to each child's whole group (and SIGCONT, so a stopped one sees it), SIGKILL to what is left after
    one shared GRACE_S, the leaders reaped."""
    running = [proc for proc in procs if proc.returncode is None]
    for proc in running:
        _signal_group(proc, signal.SIGTERM)
        _signal_group(proc, signal.SIGCONT)
    deadline = time.monotonic() + GRACE_S
    for proc in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
        _signal_group(proc, signal.SIGKILL)  # the leader is gone; grandchildren may still hold the group


_LIVE: dict[int, subprocess.Popen] = {}  # children running now, by process group


def end_all() -> None:
    """End every running child's process group."""
    procs = list(_LIVE.values())
    _end_groups(procs)
    for proc in procs:
        _forget(proc)


def _forget(proc: subprocess.Popen) -> None:
    if _LIVE.pop(proc.pid, None) is not None:
        _tell_watchdog(f"-{proc.pid}")


def _exited(proc: subprocess.Popen) -> bool:
    """Whether the child has exited, without reaping it (its pid, the group's number, stays reserved)."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped by someone else (Popen.poll)
        return proc.poll() is not None


class TimedOut(NemoRLError):
    """A command ran past its timeout (its process group was ended)."""


class Running:
    """A started child. `wait()` collects it (a Result, or NemoRLError when `check` and it failed); leaving a
    `with` block by an exception, or calling `end()`, ends its whole process group."""

    def __init__(self, argv: list[str], proc: subprocess.Popen, check: bool, remedy: str | None,
                 timeout: float | None, deadline: float | None, stream: bool, keep: int | None = None) -> None:
        self.argv, self._proc = argv, proc
        self._check, self._remedy = check, remedy
        self._timeout, self._deadline, self._stream, self._keep = timeout, deadline, stream, keep
        self._result: Result | None = None

    def done(self) -> bool:
        """Whether the child has exited (then `wait()` returns at once). It is not reaped here: its number stays
        its own until `wait()` has ended what is left of its group."""
        return self._result is not None or self._proc.returncode is not None or _exited(self._proc)

    def wait(self) -> Result:
        if self._result is None:
            self._result = self._collect()
        if self._check and self._result.returncode != 0:
            shown = self._result
            if self._stream:  # guard: process-a-streamed-stderr-is-not-called; its stderr went to the terminal as it came: kept only to read its cause from
                shown = Result(shown.args, shown.returncode, shown.stdout,
                               "(passed on to stderr as it came: see the output before this message)")
            raise NemoRLError(describe_failure(shown), full_disk(self._result) or self._remedy)  # guard: process-a-full-disk-says-to-free-space
        return self._result

    def _checkpoint(self) -> float:
        """Between slices of a wait: unwind on an interruption or past the timeout; the time left of a slice."""
        interrupt.check()  # guard: interrupt-a-wait-for-a-child-looks-at
        if self._deadline is None:
            return _SLICE_S
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimedOut(f"{shlex.join(self.argv)} did not finish within {self._timeout:g} s", self._remedy)
        return min(_SLICE_S, left)

    def _collect(self) -> Result:
        proc = self._proc
        try:
            stdout, stderr = self._read()
            pause = 0.001
            while not _exited(proc):  # the pipes closed: the child is (most often) exiting
                time.sleep(min(pause, self._checkpoint()))
                pause = min(pause * 2, _SLICE_S)
            # What the child left running in its group (a build backend's helpers) ends with it; signalled before
            # the child is reaped, so the group's number cannot belong to anyone else yet.
            _signal_group(proc, signal.SIGKILL)  # guard: fast-what-a-finished-child-left-in-its
            proc.wait()
            interrupt.check()  # guard: interrupt-a-child-dead-of-the-same; a child that died of the very signal (a whole process tree was sent SIGTERM)
        except BaseException:  # interrupted, timed out: nothing we started may outlive us
            self.end()
            raise
        _forget(proc)
        # Bytes in, text out: git fast-import streams carry binary blobs; output is decoded leniently.
        return Result(tuple(self.argv), proc.returncode, stdout.text() if stdout is not None else "",
                      stderr.text() if stderr is not None else "")

    def _read(self) -> tuple[Kept | None, Kept | None]:
        """The child's piped output until it closes, or until AFTER_EXIT_S after the child exited (a process it
        left behind may hold the pipes); with `stream`, stderr is passed on as it comes instead."""
        proc = self._proc
        # a streamed stderr is passed on and its end kept too: a failure's cause (a full disk) is read from it
        kept = {pipe: Kept(STREAM_KEPT if self._stream and pipe is proc.stderr else self._keep)
                for pipe in (proc.stdout, proc.stderr) if pipe is not None}
        exited_at = None
        with selectors.DefaultSelector() as selector:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    selector.register(pipe, selectors.EVENT_READ)
            while selector.get_map():
                timeout = self._checkpoint()
                if exited_at is None and _exited(proc):
                    exited_at = time.monotonic()
                if exited_at is not None:
                    timeout = min(timeout, exited_at + AFTER_EXIT_S - time.monotonic())
                    if timeout <= 0:  # guard: fast-pipes-are-not-waited-on-once-the
                        break
                for key, _ in selector.select(timeout=timeout):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    if self._stream and key.fileobj is proc.stderr:
                        to_stderr(chunk)  # guard: process-a-streaming-child-s-stderr
                    kept[key.fileobj].add(chunk)  # type: ignore[index]  # guard: process-a-streamed-stderr-s-end-is-read
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        return (kept.get(proc.stdout) if proc.stdout is not None else None,
                kept.get(proc.stderr) if proc.stderr is not None else None)

    def end(self) -> None:
        """End the child's group, unless it was collected already (its number may belong to another by now)."""
        if self._result is None:
            _end_groups([self._proc])
            _forget(self._proc)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if exc is not None:
            self.end()


def _checked_timeout(timeout: object) -> float | None:
    """None waits as long as it takes; anything else is values.timeout_seconds' one rule."""
    return None if timeout is None else values.timeout_seconds(timeout, "process.run")  # guard: process-run-follows-the-one-timeout-rule


def start(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    remedy: str | None = None,
    input_text: str | bytes | None = None,
    timeout: float | None = None,
    stream: bool = False,
    stdin_file: BinaryIO | None = None,
    stdout_file: BinaryIO | None = None,
    keep: int | None = None,
) -> Running:
    """Start `args` and return at once; see `run` for the arguments."""
    argv = [os.fspath(a) for a in args]
    seconds = _checked_timeout(timeout)
    deadline = None if seconds is None else time.monotonic() + seconds
    if input_text is not None:
        # from a file, not a pipe: communicate() is called again after each slice of a wait, and CPython's resumes
        # reading output but never writing input
        stdin_file = tempfile.TemporaryFile()
        stdin_file.write(input_text.encode() if isinstance(input_text, str) else input_text)
        stdin_file.seek(0)
    try:
        proc = subprocess.Popen(  # guard: process-children-in-a-session-of-their
            argv, cwd=cwd, env=dict(env) if env is not None else None,
            stdin=stdin_file or subprocess.DEVNULL,
            stdout=stdout_file or subprocess.PIPE, stderr=subprocess.PIPE,
            # a session of its own: a group nemo-rl can end, and no controlling terminal (ssh asking for a
            # passphrase fails at once instead of stopping on SIGTTIN in a background group)
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        # The caller's remedy is about the command's work (a network, a SHA); a missing program is not.
        missing = Path(argv[0]).name
        raise NemoRLError(f"cannot run {missing}: it is not installed or not on PATH",
                          f"install {missing} and make sure it is on PATH") from exc
    finally:
        if input_text is not None and stdin_file is not None:
            stdin_file.close()  # the child holds its own descriptor
    _LIVE[proc.pid] = proc
    _tell_watchdog(f"+{proc.pid}")
    return Running(argv, proc, check, remedy, seconds, deadline, stream, keep)


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    remedy: str | None = None,
    input_text: str | bytes | None = None,
    timeout: float | None = None,
    stream: bool = False,
    stdin_file: BinaryIO | None = None,
    stdout_file: BinaryIO | None = None,
    keep: int | None = None,
) -> Result:
    """Run `args`, capture its output as text, and raise NemoRLError on failure when `check`.

    `env` replaces the environment entirely; callers build it from os.environ on purpose. `stream`
    passes stderr through to the user (long builds show their progress) and captures stdout only.
    `timeout` ends the command's whole process group and raises NemoRLError. `stdin_file` and `stdout_file`
    (open files, instead of `input_text` and the captured stdout) hand tens of MB from one command to the
    next without decoding them in Python. `keep` bounds what is kept of each captured output to its last `keep`
    bytes (a command whose output only explains a failure).
    """
    return start(args, cwd=cwd, env=env, check=check, remedy=remedy, input_text=input_text, timeout=timeout,
                 stream=stream, stdin_file=stdin_file, stdout_file=stdout_file, keep=keep).wait()
