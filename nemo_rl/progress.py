"""One line per phase on stderr, so long steps (a fetch, `uv lock`, a cold build) are never silent."""

from __future__ import annotations

import sys


def progress(message: str) -> None:
    sys.stderr.write(f"==> {message}\n")
    sys.stderr.flush()
