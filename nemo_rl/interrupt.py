"""SIGINT, SIGTERM and SIGHUP set a flag the code checks; FORCE_AFTER_S later, or at a second signal, the process
exits with 128+N."""

from __future__ import annotations

import os
import signal

from nemo_rl.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FORCE_AFTER_S = 4  # the command must be gone within 5 s of the signal
_received: list[int] = []
_done: list[str] = []  # steps that cannot be undone, for the message after an interruption


def record(signum: int) -> None:
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
    """Take over the three signals, except a SIGHUP ignored by `nohup`."""
    for signum in SIGNALS:
        if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:  # guard: interrupt-nohup-s-ignored-sighup-stays
            continue
        signal.signal(signum, _on_signal)


def received() -> int | None:
    return _received[0] if _received else None


def check() -> None:
    """Raise Interrupted once a signal came; call it where unwinding is safe."""
    if _received:
        raise Interrupted(_received[0])


def completed(step: str) -> None:
    _done.append(step)


def completed_steps() -> list[str]:
    return list(_done)


def reset() -> None:
    _received.clear()
    _done.clear()
