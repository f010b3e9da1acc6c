"""-v/--verbose, accepted before the command and after any verb."""

from __future__ import annotations

import argparse

HELP = "show full tracebacks and the detail of failures"


def add(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    # SUPPRESS: `nemo-rl -v deps status` keeps the top-level value
    parser.add_argument("-v", "--verbose", action="store_true", default=False if top else argparse.SUPPRESS, help=HELP)
