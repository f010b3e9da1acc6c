"""The `nemo-rl` console script and `python -m nemo_rl`: signal handlers first, then the CLI."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import signal
import sys

from nemo_rl import interrupt

_OUTPUT_NAMES = {1: "the command's output (stdout)", 2: "the command's error output (stderr)"}
_FAILED: set[int] = set()  # descriptors a write failed on


class _ReaderMayLeave(io.RawIOBase):
    """Writes to fd 1 or 2 that survive a reader that left (`... | head -1`): after EPIPE, the fd is /dev/null."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int:
        try:
            return os.write(self._fd, data)
        except OSError as exc:
            # EIO: the terminal was closed (the SIGHUP that follows is what ends the command)
            if exc.errno not in (errno.EPIPE, errno.EIO):  # guard: pipe-a-reader-that-left-does-not-abandon
                _FAILED.add(self._fd)
                raise OSError(exc.errno, exc.strerror, _OUTPUT_NAMES.get(self._fd, f"fd {self._fd}")) from exc
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._fd)
            os.close(devnull)
            return len(data)


def _guard_output() -> None:
    for fd in (0, 1, 2):  # after `2>&-` the next file opened would become our stderr
        try:
            os.fstat(fd)
        except OSError:
            os.dup2(os.open(os.devnull, os.O_RDWR), fd)  # guard: pipe-a-closed-stderr-at-start-up-gets
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if stream is not None and stream.fileno() != fd:
            continue
        wrapper = io.TextIOWrapper(io.BufferedWriter(_ReaderMayLeave(fd)),
                                   encoding=stream.encoding if stream else "utf-8",
                                   errors=stream.errors if stream else "backslashreplace",
                                   line_buffering=stream.line_buffering if stream else False,
                                   write_through=name == "stderr")
        setattr(sys, name, wrapper)


def entry_point() -> None:
    interrupt.install()
    _guard_output()
    from nemo_rl.cli import after_late_signal, main

    try:
        code = main()
    except SystemExit as exc:  # argparse's --help and usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    # interpreter shutdown restores the default signal actions: block them, answer one that came, exit at once
    signal.alarm(0)
    signal.pthread_sigmask(signal.SIG_BLOCK, {*interrupt.SIGNALS, signal.SIGALRM})
    late = sorted(set(signal.sigpending()) & set(interrupt.SIGNALS))  # guard: interrupt-signals-blocked-once-the
    if late:
        interrupt.record(late[0])
    code = after_late_signal(code)
    os._exit(_flush_output(code))


def _flush_output(code: int) -> int:
    """Flush stdout; a write that fails is a failed command, said in one line on stderr."""
    said = 1 in _FAILED
    try:
        sys.stdout.flush()
    except OSError as exc:
        if not said:
            done = interrupt.completed_steps()  # guard: full-disk-output-that-cannot-be-flushed
            message = (f"error: cannot write {_OUTPUT_NAMES[1]}: {exc.strerror} (free space where it goes, or "
                       "write it elsewhere)" + (f"; the command itself {'finished' if code == 0 else 'ended'}, and "
                                                f"these steps were complete: {'; '.join(done)}" if done else "") + "\n")
            with contextlib.suppress(OSError):
                os.write(2, message.encode(errors="backslashreplace"))
        code = code or 1  # guard: fixes-output-that-cannot-be-written
    except (ValueError, AttributeError):  # closed or replaced by the command
        pass
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
    return code


if __name__ == "__main__":
    entry_point()
