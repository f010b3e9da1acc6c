"""The `nemo-rl` command: argparse and dispatch only; each verb lives in its own module."""

from __future__ import annotations

import argparse
import sys
import traceback

from nemo_rl import __version__
from nemo_rl.errors import NemoRLError


def build_parser() -> argparse.ArgumentParser:
    from nemo_rl.deps import cli as deps_cli  # noqa: PLC0415 - keeps `import nemo_rl.cli` cheap
    from nemo_rl.doctor import command as doctor

    parser = argparse.ArgumentParser(
        prog="nemo-rl",
        description="nemo-rl: post-training for LLMs; environment checks and fork-pin tooling.",
    )
    parser.add_argument("--version", action="version", version=f"nemo-rl {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show full tracebacks of failures")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    doctor.add_parser(subparsers)
    deps_cli.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; 0 ok, 1 expected failure (NemoRLError), 3 unexpected error, 130 Ctrl-C."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except NemoRLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.verbose:
            traceback.print_exc()
        print(f"unexpected error: {type(exc).__name__}: {exc}\n"
              "  this is a bug in nemo-rl; run again with --verbose and report the traceback", file=sys.stderr)
        return 3


def entry_point() -> None:
    sys.exit(main())
