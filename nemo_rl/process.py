"""The one runner for external commands. Nothing else in nemo_rl calls subprocess.

Every child starts a process group of its own (so a Ctrl-C at the terminal reaches nemo-rl alone, and uv's build
backends can be ended with the uv that started them), with no Python code run between fork and exec. No thread
starts a child: a command that waits on two things starts both children and collects them in turn (`start`).
A wait notices an interruption (nemo_rl.interrupt) within _SLICE_S, ends the child's group and unwinds. A watchdog
process ends the groups still registered when nemo-rl itself dies, SIGKILL included, so no `uv lock` or build
backend lives on to rewrite files after nemo-rl has exited.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from nemo_rl import interrupt
from nemo_rl.errors import NemoRLError

GRACE_S = 2.0  # between SIGTERM and SIGKILL for a group being ended: the whole command must end within 5 s
_SLICE_S = 0.2  # how often a wait looks at the interruption flag


@dataclass(frozen=True)
class Result:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def _indent(text: str) -> str:
    text = text.rstrip()
    return "\n".join("    " + line for line in text.splitlines()) if text else "    (nothing)"


def describe_failure(result: Result) -> str:
    return (
        f"command failed (exit {result.returncode}): {shlex.join(result.args)}\n"
        f"  stdout:\n{_indent(result.stdout)}\n  stderr:\n{_indent(result.stderr)}"
    )


# The watchdog reads "+PGID" / "-PGID" lines; at end of input (nemo-rl exited, however) it kills what is left.
# A group is removed only after its leader was reaped, so the number cannot have been reused yet.
_WATCHDOG = """
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
groups = set()
for line in sys.stdin:
    (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
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


def _end_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the child's whole group, SIGKILL after GRACE_S, and the leader reaped."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=GRACE_S)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    try:  # the leader is gone; grandchildren may still hold the group
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_LIVE: dict[int, subprocess.Popen] = {}  # children running now, by process group


def end_all() -> None:
    """End every running child's process group."""
    for proc in list(_LIVE.values()):
        _end_group(proc)


class Running:
    """A started child. `wait()` collects it (a Result, or NemoRLError when `check` and it failed); leaving a
    `with` block by an exception, or calling `end()`, ends its whole process group."""

    def __init__(self, argv: list[str], proc: subprocess.Popen, check: bool, remedy: str | None,
                 timeout: float | None) -> None:
        self.argv, self._proc = argv, proc
        self._check, self._remedy = check, remedy
        self._deadline = time.monotonic() + timeout if timeout is not None else None
        self._timeout = timeout
        self._result: Result | None = None

    def wait(self) -> Result:
        if self._result is None:
            self._result = self._collect()
        if self._check and self._result.returncode != 0:
            raise NemoRLError(describe_failure(self._result), self._remedy)
        return self._result

    def _collect(self) -> Result:
        proc = self._proc
        try:
            while True:
                interrupt.check()
                left = None if self._deadline is None else self._deadline - time.monotonic()
                if left is not None and left <= 0:
                    _end_group(proc)
                    raise NemoRLError(f"{shlex.join(self.argv)} did not finish within {self._timeout:g} s",
                                      self._remedy)
                try:
                    stdout, stderr = proc.communicate(timeout=_SLICE_S if left is None else min(_SLICE_S, left))
                    break
                except subprocess.TimeoutExpired:
                    continue
        except BaseException:  # interrupted, timed out: nothing we started may outlive us
            self.end()
            raise
        self._forget()
        # Bytes in, text out: git fast-import streams carry binary blobs; output is decoded leniently.
        return Result(self.argv, proc.returncode, stdout.decode(errors="replace") if stdout is not None else "",
                      stderr.decode(errors="replace") if stderr is not None else "")

    def end(self) -> None:
        _end_group(self._proc)
        self._forget()

    def _forget(self) -> None:
        if _LIVE.pop(self._proc.pid, None) is not None:
            _tell_watchdog(f"-{self._proc.pid}")

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
) -> Running:
    """Start `args` and return at once; see `run` for the arguments."""
    argv = [os.fspath(a) for a in args]
    if timeout is not None and not (isinstance(timeout, int | float) and 0 < timeout < float("inf")):
        raise NemoRLError(f"timeout must be a positive number of seconds, not {timeout!r}",
                          "pass a finite timeout greater than 0, or None to wait as long as it takes")
    if input_text is not None:
        # from a file, not a pipe: communicate() is called again after each slice of a wait, and CPython's resumes
        # reading output but never writing input
        stdin_file = tempfile.TemporaryFile()
        stdin_file.write(input_text.encode() if isinstance(input_text, str) else input_text)
        stdin_file.seek(0)
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env) if env is not None else None,
            stdin=stdin_file or subprocess.DEVNULL,
            stdout=stdout_file or subprocess.PIPE, stderr=None if stream else subprocess.PIPE,
            process_group=0,
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
    return Running(argv, proc, check, remedy, timeout)


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
) -> Result:
    """Run `args`, capture its output as text, and raise NemoRLError on failure when `check`.

    `env` replaces the environment entirely; callers build it from os.environ on purpose. `stream`
    passes stderr through to the user (long builds show their progress) and captures stdout only.
    `timeout` ends the command's whole process group and raises NemoRLError. `stdin_file` and `stdout_file`
    (open files, instead of `input_text` and the captured stdout) hand tens of MB from one command to the
    next without decoding them in Python.
    """
    return start(args, cwd=cwd, env=env, check=check, remedy=remedy, input_text=input_text, timeout=timeout,
                 stream=stream, stdin_file=stdin_file, stdout_file=stdout_file).wait()
