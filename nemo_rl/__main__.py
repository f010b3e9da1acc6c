"""The `nemo-rl` console script and `python -m nemo_rl`.

The signal handler goes in before the rest of nemo-rl is imported: a Ctrl-C in the first moments, or a job
started with SIGINT ignored, is then handled like any other (nemo_rl/interrupt.py)."""

from __future__ import annotations

import errno
import io
import os
import signal
import sys

from nemo_rl import interrupt

_OUTPUT_NAMES = {1: "the command's output (stdout)", 2: "the command's error output (stderr)"}
_FAILED: set[int] = set()  # the descriptors a write failed on (the command's error said so already)


class _ReaderMayLeave(io.RawIOBase):
    """Writes to fd 1 or 2, also once nobody reads them: `nemo-rl deps bump … | head -1` must not abandon the bump at
    its second progress line. After the first EPIPE the descriptor points at /dev/null, for our later writes and
    for the children that inherit it (a child writing into a closed pipe would die of SIGPIPE)."""

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
            # EPIPE: the reader left; EIO: the terminal was closed (the SIGHUP that follows is the signal to act on)
            if exc.errno not in (errno.EPIPE, errno.EIO):  # guard: pipe-a-reader-that-left-does-not-abandon
                # a full disk, a quota: the output is lost, so the command failed; main names where it went
                _FAILED.add(self._fd)
                raise OSError(exc.errno, exc.strerror, _OUTPUT_NAMES.get(self._fd, f"fd {self._fd}")) from exc
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._fd)
            os.close(devnull)
            return len(data)


def _guard_output() -> None:
    for fd in (0, 1, 2):  # started with `2>&-`: /dev/null there, or the next file opened would become our stderr
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
    # A cancelled CI job sends SIGTERM, a closed terminal SIGHUP: both end the command like Ctrl-C, so every
    # rollback and child clean-up runs.
    interrupt.install()
    _guard_output()
    from nemo_rl.cli import after_late_signal, main

    try:
        code = main()
    except SystemExit as exc:  # argparse's --help and usage errors: their output is flushed below too
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    # Shutting the interpreter down restores the default actions: a signal then would end the process with no
    # exit code of ours (a bump that landed would read as killed). So the signals are blocked, one that came
    # meanwhile is answered, and the process ends at once, with nothing left to run that needs the interpreter.
    signal.alarm(0)
    signal.pthread_sigmask(signal.SIG_BLOCK, {*interrupt.SIGNALS, signal.SIGALRM})
    late = sorted(set(signal.sigpending()) & set(interrupt.SIGNALS))  # guard: interrupt-signals-blocked-once-the
    if late:
        interrupt.record(late[0])
    code = after_late_signal(code)
    os._exit(_flush_output(code))


def _flush_output(code: int) -> int:
    """Write what stdout still buffers (redirected to a file, all of it is still here): a write that fails is a
    failed command, said in one line on stderr (an exit 0 would pass off lost output as a result)."""
    said = 1 in _FAILED  # a write the command made failed: its error named it already
    try:
        sys.stdout.flush()
    except OSError as exc:
        if not said:
            # `bump > log || handle-failure`: the exit is 1, yet what the command did has happened
            done = interrupt.completed_steps()  # guard: full-disk-output-that-cannot-be-flushed
            message = (f"error: cannot write {_OUTPUT_NAMES[1]}: {exc.strerror} (free space where it goes, or "
                       "write it elsewhere)" + (f"; the command itself {'finished' if code == 0 else 'ended'}, and "
                                                f"these steps were complete: {'; '.join(done)}" if done else "") + "\n")
            try:
                os.write(2, message.encode(errors="backslashreplace"))
            except OSError:  # stderr cannot be written either: the exit code is all that is left
                pass
        code = code or 1  # guard: fixes-output-that-cannot-be-written
    except (ValueError, AttributeError):  # closed or replaced by the command: nothing of ours to write
        pass
    try:
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    return code


if __name__ == "__main__":
    entry_point()
