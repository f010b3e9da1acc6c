"""SIGINT, SIGTERM and SIGHUP as a flag that cannot be lost, and an exit that cannot be missed.

The handler raises nothing. An exception raised from a signal handler lands in whatever Python code runs at
that moment: inside a finalizer or an at-fork hook CPython prints "Exception ignored" and drops it, and the
command runs on (or hangs on a lock the dropped frame held). So the handler only records the first signal; the
code stops at the next checkpoint, `check()`: every wait for a child (process.Running, several times a second:
the child's whole group is ended there), for a lock (locks.acquire), and the start of a landing. Steps that must
not be cut in half (a landing's renames) contain no checkpoint.

Work with no checkpoint (doctor's in-process probes) must not outlive the signal either: FORCE_AFTER_S after
it, or at a second signal, the process exits at once with 128+N, as a SIGKILL would leave it (the watchdog ends
the children; staging copies are removed by the next command; a landing cut inside its renames is finished by
`nemo-rl deps recover`).

This module imports only the standard library: the console script installs the handler before anything else
is imported (nemo_rl/__main__.py).
"""

from __future__ import annotations

import os
import signal

from nemo_rl.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FORCE_AFTER_S = 4  # the command must be gone within 5 s of the signal
_received: list[int] = []  # the first signal, once one came
_done: list[str] = []  # steps completed that cannot be undone, for the message after an interruption


def record(signum: int) -> None:
    """What the handler does first; tests call it to stand for a signal without arming the forced exit."""
    if not _received:  # guard: interrupt-the-handler-records-the-signal
        _received.append(signum)


def _on_signal(signum: int, frame: object) -> None:
    if _received:  # guard: interrupt-a-second-signal-ends-at-once; a second signal: the user insists
        _force(signum, frame)
    record(signum)
    signal.signal(signal.SIGALRM, _force)
    signal.alarm(FORCE_AFTER_S)  # guard: interrupt-the-forced-exit-is-armed


def _force(signum: int, frame: object) -> None:
    os.write(2, b"nemo-rl: interrupted; did not stop at a safe point in time, ended at once (`nemo-rl deps status` "
                b"says what a killed command left)\n")
    os._exit(128 + (_received[0] if _received else signum))


def install() -> None:
    """Take over the three signals, also when the parent ignored SIGINT (a job started with `&` in a script); an
    ignored SIGHUP stays ignored (`nohup` asked for exactly that)."""
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
    """Record that `step` finished for good (a landing): an interruption after it must not say "nothing changed"."""
    _done.append(step)


def completed_steps() -> list[str]:
    return list(_done)


def reset() -> None:
    """For tests that run several commands in one process."""
    _received.clear()
    _done.clear()
