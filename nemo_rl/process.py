"""The one runner for external commands: each child runs in a session of its own, whose group nemo-rl ends, or a
watchdog when nemo-rl dies."""

from __future__ import annotations

import contextlib
import os
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from nemo_rl import interrupt, values
from nemo_rl.errors import NemoRLError


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def _indent(text: str) -> str:
    text = text.rstrip()
    return "\n".join("    " + line for line in text.splitlines()) if text else "    (nothing)"


STREAM_KEPT = 1 << 16  # bytes of a streamed stderr kept
_FULL = ("No space left on device", "os error 28", "Disk quota exceeded", "os error 122")


def full_disk(result: Result) -> str | None:
    """The remedy for a command that failed on a full filesystem, else None."""
    if any(mark in f"{result.stdout}\n{result.stderr}" for mark in _FULL):
        return "free space on the filesystem named above (`df -h` shows which is full)"
    return None


def describe_failure(result: Result) -> str:
    return (
        f"command failed (exit {result.returncode}): {shlex.join(result.args)}\n"
        f"  stdout:\n{_indent(result.stdout)}\n  stderr:\n{_indent(result.stderr)}"
    )


def to_stderr(chunk: bytes) -> None:
    """Pass on a streaming child's stderr, so a closed reader does not kill the child with SIGPIPE."""
    buffer = getattr(sys.stderr, "buffer", None)
    if buffer is not None:
        buffer.write(chunk)
    else:
        sys.stderr.write(chunk.decode(errors="replace"))
    sys.stderr.flush()


class Kept:
    """A pipe's output, or its last `limit` bytes."""

    def __init__(self, limit: int | None) -> None:
        self.limit, self.data, self.dropped = limit, bytearray(), 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if self.limit is not None and len(self.data) > 2 * self.limit:  # guard: fast-kept-output-is-bounded-while-it-is
            self.dropped += len(self.data) - self.limit
            del self.data[:-self.limit]

    def text(self) -> str:
        if self.limit is not None and len(self.data) > self.limit:
            self.dropped += len(self.data) - self.limit
            del self.data[:-self.limit]
        text = self.data.decode(errors="replace")
        return f"[{self.dropped} bytes before this left out]\n{text}" if self.dropped else text


GRACE_S = 2.0  # between SIGTERM and SIGKILL: the whole command must end within 5 s
_SLICE_S = 0.2
# a process that left the child's group but kept its pipes open is not waited on past this
AFTER_EXIT_S = 0.5


# The watchdog reads "+PGID" / "-PGID" lines; at end of input it sends SIGTERM (git removes its lock files), then
# SIGKILL. A group is removed only after its leader was reaped, so its number cannot have been reused.
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
_watchdogs: dict[int, subprocess.Popen] = {}  # by the watched pid: a fork gets its own


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
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)


def _end_groups(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each child's group, SIGKILL after one shared GRACE_S; the leaders reaped."""
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


_LIVE: dict[int, subprocess.Popen] = {}  # by process group


def end_all() -> None:
    procs = list(_LIVE.values())
    _end_groups(procs)
    for proc in procs:
        _forget(proc)


def _forget(proc: subprocess.Popen) -> None:
    if _LIVE.pop(proc.pid, None) is not None:
        _tell_watchdog(f"-{proc.pid}")


def _exited(proc: subprocess.Popen) -> bool:
    """Whether the child has exited, without reaping it."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped by someone else (Popen.poll)
        return proc.poll() is not None


class TimedOut(NemoRLError):
    """A command ran past its timeout; its process group was ended."""


class Running:
    """A started child: `wait()` collects it; `end()` or an exception out of `with` ends its group."""

    def __init__(self, argv: list[str], proc: subprocess.Popen, check: bool, remedy: str | None,
                 timeout: float | None, deadline: float | None, stream: bool, keep: int | None = None) -> None:
        self.argv, self._proc = argv, proc
        self._check, self._remedy = check, remedy
        self._timeout, self._deadline, self._stream, self._keep = timeout, deadline, stream, keep
        self._result: Result | None = None

    def wait(self) -> Result:
        if self._result is None:
            self._result = self._collect()
        if self._check and self._result.returncode != 0:
            shown = self._result
            if self._stream:  # guard: process-a-streamed-stderr-is-not-called
                shown = Result(shown.args, shown.returncode, shown.stdout,
                               "(passed on to stderr as it came: see above)")
            raise NemoRLError(describe_failure(shown), full_disk(self._result) or self._remedy)  # guard: process-a-full-disk-says-to-free-space
        return self._result

    def _checkpoint(self) -> float:
        """The time left of a slice; raises on an interruption or past the timeout."""
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
            while not _exited(proc):
                time.sleep(min(pause, self._checkpoint()))
                pause = min(pause * 2, _SLICE_S)
            # what the child left in its group ends with it; before the reap, while the number is still its own
            _signal_group(proc, signal.SIGKILL)  # guard: fast-what-a-finished-child-left-in-its
            proc.wait()
            interrupt.check()  # guard: interrupt-a-child-dead-of-the-same
        except BaseException:
            self.end()
            raise
        _forget(proc)
        return Result(tuple(self.argv), proc.returncode, stdout, stderr)

    def _read(self) -> tuple[str, str]:
        """The child's output until its pipes close or AFTER_EXIT_S after it exited."""
        proc = self._proc
        # a streamed stderr's end is kept too: a failure's cause (a full disk) is read from it
        kept = {pipe: Kept(STREAM_KEPT if self._stream and pipe is proc.stderr else self._keep)
                for pipe in (proc.stdout, proc.stderr) if pipe is not None}
        exited_at = None
        with selectors.DefaultSelector() as selector:
            for pipe in kept:
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
        for pipe in kept:
            pipe.close()
        stdout, stderr = (kept[pipe].text() if pipe in kept else "" for pipe in (proc.stdout, proc.stderr))
        return stdout, stderr

    def end(self) -> None:
        if self._result is None:
            _end_groups([self._proc])
            _forget(self._proc)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if exc is not None:
            self.end()


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
    """Start `args`; `wait()` raises NemoRLError on failure when `check`. `env` replaces the environment; `stream`
    passes stderr through; `keep`: keep each output's last `keep` bytes."""
    argv = [os.fspath(a) for a in args]
    seconds = None
    if timeout is not None:
        seconds = values.timeout_seconds(timeout, "process.run")  # guard: process-run-follows-the-one-timeout-rule
    deadline = None if seconds is None else time.monotonic() + seconds
    if input_text is not None:
        # a file, not a pipe: input written by a pipe would stall the sliced wait
        stdin_file = tempfile.TemporaryFile()
        stdin_file.write(input_text.encode() if isinstance(input_text, str) else input_text)
        stdin_file.seek(0)
    try:
        proc = subprocess.Popen(  # guard: process-children-in-a-session-of-their
            argv, cwd=cwd, env=dict(env) if env is not None else None,
            stdin=stdin_file or subprocess.DEVNULL,
            stdout=stdout_file or subprocess.PIPE, stderr=subprocess.PIPE,
            # no controlling terminal: ssh asking for a passphrase fails instead of stopping on SIGTTIN
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        missing = Path(argv[0]).name
        raise NemoRLError(f"cannot run {missing}: it is not on PATH", f"install {missing} on PATH") from exc
    finally:
        if input_text is not None and stdin_file is not None:
            stdin_file.close()
    _LIVE[proc.pid] = proc
    _tell_watchdog(f"+{proc.pid}")
    return Running(argv, proc, check, remedy, seconds, deadline, stream, keep)


def waited[**P](starter: Callable[P, Running]) -> Callable[P, Result]:
    def run(*args: P.args, **kwargs: P.kwargs) -> Result:
        return starter(*args, **kwargs).wait()

    return run


run = waited(start)
