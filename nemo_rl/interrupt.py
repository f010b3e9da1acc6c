"""SIGINT, SIGTERM and SIGHUP as a flag that cannot be lost.

The handler raises nothing. An exception raised from a signal handler lands in whatever Python code runs at
that moment: inside a finalizer or an at-fork hook CPython prints "Exception ignored" and drops it, and the
command runs on (or hangs on a lock the dropped frame held). So the handler only records the first signal; the
code stops at the next checkpoint, `check()`: every wait for a child (process.Running, several times a second:
the child's whole group is ended there) and for a lock (locks.acquire). Steps that must not be cut in half (a
landing's renames) contain no checkpoint.

This module imports only the standard library: the console script installs the handler before anything else
is imported (nemo_rl/__main__.py).
"""

from __future__ import annotations

import signal

from nemo_rl.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []  # the first signal, once one came
_done: list[str] = []  # steps completed that cannot be undone, for the message after an interruption


def _on_signal(signum: int, frame: object) -> None:
    if not _received:
        _received.append(signum)


def install() -> None:
    """Take over the three signals, also when the parent ignored SIGINT (a job started with `&` in a script)."""
    for signum in SIGNALS:
        signal.signal(signum, _on_signal)


def received() -> int | None:
    return _received[0] if _received else None


def check() -> None:
    """Raise Interrupted at a point where unwinding is safe, once a signal came."""
    if _received:
        raise Interrupted(_received[0])


def completed(step: str) -> None:
    """Record that `step` finished for good (a landing): an interruption after it must not say "nothing changed"."""
    _done.append(step)


def completed_steps() -> list[str]:
    return list(_done)


def reset() -> None:
    """For tests that run several commands in one process."""
    _received.clear()
    _done.clear()
