"""`nemo-rl envs prune`: remove stale environments and killed builds that no process uses."""

from __future__ import annotations

import argparse

from nemo_rl import envs
from nemo_rl.project.model import Project

HELP = "remove stale environments (this checkout's, or another nemo-rl's) and killed builds that no process uses"
DESCRIPTION = HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    envs.common(parser)


def run(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl import values
    from nemo_rl.workers import housekeeping

    rows = housekeeping.listing(project)
    removed = housekeeping.prune(project, rows)
    print("\n".join(f"removed {path}" for path in removed) or "nothing to prune")
    for entry in rows:
        if entry.state == "broken":
            print(values.printable(f"left {entry.path} (broken): {entry.detail}"))
    return 0
