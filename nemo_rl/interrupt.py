"""SIGINT, SIGTERM and SIGHUP as a flag that cannot be lost, and an exit that cannot be missed.

The handler only records the signal: an exception raised from a handler can land in a finalizer, where CPython
drops it. The code stops at the next `check()`. FORCE_AFTER_S after the signal, or at a second one, the process
exits at once with 128+N. Standard library only: the console script installs the handler first.
"""

from __future__ import annotations

import os
import signal

from nemo_rl.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FORCE_AFTER_S = 4  # the command must be gone within 5 s of the signal
_received: list[int] = []
_done: list[str] = []  # steps that cannot be undone, for the message after an interruption


def record(signum: int) -> None:
    """Record a signal without arming the forced exit."""
    if not _received:  # guard: interrupt-the-handler-records-the-signal
        _received.append(signum)


def _on_signal(signum: int, frame: object) -> None:
    if _received:  # guard: interrupt-a-second-signal-ends-at-once
        _force(signum, frame)
    record(signum)
    signal.signal(signal.SIGALRM, _force)
    signal.alarm(FORCE_AFTER_S)  # guard: interrupt-the-forced-exit-is-armed


def _force(signum: int, frame: object) -> None:
    os.write(2, b"nemo-rl: interrupted and ended at once; run `nemo-rl deps status` to see what it left\n")
    os._exit(128 + (_received[0] if _received else signum))


def install() -> None:
    """Take over the three signals; a SIGHUP ignored by `nohup` stays ignored."""
    for signum in SIGNALS:
        if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:  # guard: interrupt-nohup-s-ignored-sighup-stays
            continue
        signal.signal(signum, _on_signal)


def received() -> int | None:
    return _received[0] if _received else None


def check() -> None:
    """Raise Interrupted at a point where unwinding is safe, once a signal came."""
    if _received:
        raise Interrupted(_received[0])


def completed(step: str) -> None:
    """Record that `step` finished for good, for the message after an interruption."""
    _done.append(step)


def completed_steps() -> list[str]:
    return list(_done)


def reset() -> None:
    """For tests that run several commands in one process."""
    _received.clear()
    _done.clear()
