"""`nemo-rl envs list`: every worker environment and bundle of this project."""

from __future__ import annotations

import argparse
import time

from nemo_rl import envs, values
from nemo_rl.project.model import Project

HELP = "every environment and bundle: key, state, in use, size, last use"
DESCRIPTION = HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    envs.common(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _describe(row) -> str:
    used = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.last_used)) if row.last_used else "never"
    state = row.state + (f" (in use: pid {', '.join(map(str, row.users))})" if row.users else "")
    whose = f"  of {row.project}" if row.state == "other checkout" and row.project else ""
    detail = f"  ({row.detail})" if row.detail else ""
    return values.printable(f"{row.key}  {state:<16}  {row.size_mb:>8.1f} MB  last used {used}  "  # guard: terminal-envs-list-lines-show-escapes
                            f"{' '.join(row.flags) or '(no flags)'}  {row.path}{whose}{detail}")


def run(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl import settings
    from nemo_rl.jsonout import dumps
    from nemo_rl.workers import housekeeping

    rows, packed = housekeeping.listing(project), housekeeping.bundle_rows(project)
    if args.json:
        print(dumps({"environments": rows, "bundles": packed}))
        return 0
    print("\n".join(_describe(row) for row in rows) or f"no worker environments in {settings.venv_dir(False)}")
    for row in packed:
        print(values.printable(f"bundle {row.path.name}  {row.state:<7}  {row.size_mb:>8.1f} MB  "
                               f"{' '.join(row.flags)}  {row.path}" + (f"  ({row.detail})" if row.detail else "")))
    return 0
