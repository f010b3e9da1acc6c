"""-v/--verbose, one meaning on every command: show full tracebacks and the detail of failures (doctor's
--smoke checks included). Accepted before the command and after any verb."""

from __future__ import annotations

import argparse

HELP = "show full tracebacks and the detail of failures"


def add(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    # a verb's default is SUPPRESS: `nemo-rl -v deps status` keeps the value the top-level parser set
    parser.add_argument("-v", "--verbose", action="store_true", default=False if top else argparse.SUPPRESS,
                        help=HELP)
