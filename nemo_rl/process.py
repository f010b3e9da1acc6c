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


_LIVE: set[subprocess.Popen] = set()  # children running now, from any thread


def end_all() -> None:
    """End every running child's process group (an interruption: children started by other threads too)."""
    for proc in list(_LIVE):
        _end_group(proc)


def in_background[T](work: Callable[[], T]) -> Callable[[], T]:
    """Start `work` in a thread (it waits on its own subprocesses while this thread waits on others); the
    returned function waits for it and returns its result or raises its exception. The thread is a daemon, and
    an interruption ends its children through end_all()."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the caller, who decides
            outcome.append((False, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()

    def result() -> T:
        thread.join()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    return result


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
) -> Result:
    """Run `args`, capture its output as text, and raise NemoRLError on failure when `check`.

    `env` replaces the environment entirely; callers build it from os.environ on purpose. `stream`
    passes stderr through to the user (long builds show their progress) and captures stdout only.
    `timeout` ends the command's whole process group and raises NemoRLError.
    """
    argv = [os.fspath(a) for a in args]
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=None if stream else subprocess.PIPE,
            start_new_session=True, preexec_fn=_die_with_parent,
        )
    except FileNotFoundError as exc:
        # The caller's remedy is about the command's work (a network, a SHA); a missing program is not.
        missing = Path(argv[0]).name
        raise NemoRLError(f"cannot run {missing}: it is not installed or not on PATH",
                          f"install {missing} and make sure it is on PATH") from exc
    data = input_text.encode() if isinstance(input_text, str) else input_text
    _LIVE.add(proc)
    try:
        stdout, stderr = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _end_group(proc)
        raise NemoRLError(f"{shlex.join(argv)} did not finish within {timeout:g} s", remedy) from exc
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: nothing we started may outlive us
        _end_group(proc)
        raise
    finally:
        _LIVE.discard(proc)
    # Bytes in, text out: git fast-import streams carry binary blobs; output is decoded leniently.
    result = Result(argv, proc.returncode, stdout.decode(errors="replace"),
                    stderr.decode(errors="replace") if stderr is not None else "")
    if check and result.returncode != 0:
        raise NemoRLError(describe_failure(result), remedy)
    return result
