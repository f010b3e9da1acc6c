"""`nemo-rl deps`: fork pins, lock and environment status, fork bumps and patch records. One module per verb; here, what
they share: the group's help, common options and the fixes more than one verb prints."""

from __future__ import annotations

import argparse

from nemo_rl import values, verbose

HELP = "status, bump and patch records of the pinned forks"
DESCRIPTION = """\
Fork pins of the mcore extra. Everything honours git's url.<base>.insteadOf, so a site with a mirror
runs these unchanged after `git config --global url.<mirror>.insteadOf https://github.com/<owner>/<repo>.git`."""

REGENERATE = "run `nemo-rl deps patches {dist}` (and review the why-note), then commit patches/{dist}/ with " \
             "pyproject.toml and uv.lock"
FIX = "run `nemo-rl deps patches {dist}` (it records what the fork declares at the pin, writes the derived entry " \
      "and relocks)"
FIX_NO_ENTRY = "run `nemo-rl deps patches {dist}` (it records what the fork declares at the pin and relocks the fork)"


def fix(distribution: str, derives: bool) -> str:
    """What `deps patches` does for a fork, said of the entry only where the fork has one (`derives`)."""
    return (FIX if derives else FIX_NO_ENTRY).format(dist=distribution)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    verbose.add(parser)  # guard: fast-v-between-deps-and-its-verb


def common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", type=values.path_argument,
                        help="project directory (default: found from the current one)")
    verbose.add(parser)


def writes(parser: argparse.ArgumentParser) -> None:
    """--no-wait, for a verb that writes the project."""
    parser.add_argument("--no-wait", action="store_true",
                        help="fail at once when another nemo-rl command is changing the project (default: wait)")
