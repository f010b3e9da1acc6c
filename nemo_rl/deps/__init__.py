"""`nemo-rl deps`: the group's help, common options and shared fixes."""

from __future__ import annotations

import argparse

from nemo_rl import values, verbose

HELP = "status, bump and patch records of the pinned forks"
DESCRIPTION = "Fork pins of the mcore extra. Git's url.<base>.insteadOf mirrors are honoured."

REGENERATE = "run `nemo-rl deps patches {dist}`, then commit patches/{dist}/ with pyproject.toml and uv.lock"
FIX = "run `nemo-rl deps patches {dist}` (it writes the derived entry and relocks)"
FIX_NO_ENTRY = "run `nemo-rl deps patches {dist}` (it relocks the fork)"
DIST_HELP = "fork-pinned distribution, e.g. megatron-core"
ONE_FORK_HELP = "one fork (default: every fork)"


def fix(distribution: str, derives: bool) -> str:
    return (FIX if derives else FIX_NO_ENTRY).format(dist=distribution)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    verbose.add(parser)  # guard: fast-v-between-deps-and-its-verb


def common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", type=values.path_argument,
                        help="project directory (default: found from the current one)")
    verbose.add(parser)


def writes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-wait", action="store_true",
                        help="fail at once when another nemo-rl command is changing the project")
