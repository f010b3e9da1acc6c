"""One line per phase on stderr, so long steps (a fetch, `uv lock`, a cold build) are never silent."""

from __future__ import annotations

import sys
import threading

_LOCK = threading.Lock()  # a bump reads the fork's metadata while uv locks: one whole line at a time


def progress(message: str) -> None:
    with _LOCK:
        sys.stderr.write(f"==> {message}\n")
        sys.stderr.flush()
