"""The one runner for external commands. Nothing else in nemo_rl calls subprocess.

Children run in their own process group, so a Ctrl-C at the terminal reaches nemo-rl alone and nemo-rl
decides: on any interruption it ends the whole group (uv's build backends included) before unwinding,
and on Linux the direct child also gets SIGKILL if nemo-rl itself is killed, so no `uv lock` lives on
to rewrite files after nemo-rl has exited.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from nemo_rl.errors import NemoRLError

_PR_SET_PDEATHSIG = 1


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


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None  # loaded once, not per child


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _end_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    try:  # the leader is gone; grandchildren may still hold the group
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_LIVE: dict[subprocess.Popen, threading.Event | None] = {}  # children running now, from any thread
_WORK = threading.local()  # .cancelled: the Event of the Background this thread runs, if any


class Cancelled(BaseException):
    """Raised in a Background's thread once it is cancelled; never reaches a user (cancel() discards it)."""


def end_all() -> None:
    """End every running child's process group (an interruption: children started by other threads too)."""
    for proc in list(_LIVE):
        _end_group(proc)


class Background[T]:
    """`work` running in a thread while the caller does something else (each waits on its own subprocesses).

    `result()` waits and returns its value or raises its exception. As a context manager, leaving the block by an
    exception cancels the work: its running children are ended, it can start no other, and its outcome is
    discarded; leaving it normally waits for the result. The thread is a daemon, and an interruption ends its
    children through end_all()."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._cancelled = threading.Event()
        self._outcome: list[tuple[bool, object]] = []
        self._thread = threading.Thread(target=self._target, args=(work,), daemon=True)
        self._thread.start()

    def _target(self, work: Callable[[], T]) -> None:
        _WORK.cancelled = self._cancelled
        try:
            self._outcome.append((True, work()))
        except BaseException as exc:  # handed to the caller, who decides
            self._outcome.append((False, exc))

    def result(self) -> T:
        self._thread.join()
        ok, value = self._outcome[0]
        if not ok:
            raise value  # type: ignore[misc]
        return value  # type: ignore[return-value]

    def cancel(self) -> None:
        self._cancelled.set()
        for proc, owner in list(_LIVE.items()):
            if owner is self._cancelled:
                _end_group(proc)
        self._thread.join()

    def __enter__(self) -> Background[T]:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if exc is not None:
            self.cancel()
        else:
            self.result()


def in_background[T](work: Callable[[], T]) -> Background[T]:
    return Background(work)


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
    argv = [os.fspath(a) for a in args]
    cancelled: threading.Event | None = getattr(_WORK, "cancelled", None)
    if cancelled is not None and cancelled.is_set():
        raise Cancelled
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env) if env is not None else None,
            stdin=stdin_file or (subprocess.PIPE if input_text is not None else subprocess.DEVNULL),
            stdout=stdout_file or subprocess.PIPE, stderr=None if stream else subprocess.PIPE,
            start_new_session=True, preexec_fn=_die_with_parent,
        )
    except FileNotFoundError as exc:
        # The caller's remedy is about the command's work (a network, a SHA); a missing program is not.
        missing = Path(argv[0]).name
        raise NemoRLError(f"cannot run {missing}: it is not installed or not on PATH",
                          f"install {missing} and make sure it is on PATH") from exc
    data = input_text.encode() if isinstance(input_text, str) else input_text
    _LIVE[proc] = cancelled
    try:
        if cancelled is not None and cancelled.is_set():  # cancel() may have looked at _LIVE just before
            raise Cancelled
        stdout, stderr = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _end_group(proc)
        raise NemoRLError(f"{shlex.join(argv)} did not finish within {timeout:g} s", remedy) from exc
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: nothing we started may outlive us
        _end_group(proc)
        raise
    finally:
        _LIVE.pop(proc, None)
    # Bytes in, text out: git fast-import streams carry binary blobs; output is decoded leniently.
    result = Result(argv, proc.returncode, stdout.decode(errors="replace") if stdout is not None else "",
                    stderr.decode(errors="replace") if stderr is not None else "")
    if check and result.returncode != 0:
        raise NemoRLError(describe_failure(result), remedy)
    return result
