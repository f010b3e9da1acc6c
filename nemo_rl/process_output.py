"""What the runner keeps of a child's output, and how a failed command is described."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass


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
