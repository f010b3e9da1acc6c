"""One line per phase on stderr, so long steps are never silent."""

from __future__ import annotations

import sys

from nemo_rl import values


def progress(message: str) -> None:
    sys.stderr.write(f"==> {values.printable(message)}\n")  # guard: terminal-progress-lines-a-lock-holder-s
    sys.stderr.flush()
