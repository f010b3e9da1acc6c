"""`nemo-rl deps recover`: finish or discard what a killed bump left in .nemo-rl/."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from nemo_rl import deps
from nemo_rl.project import journal, state_dir
from nemo_rl.project.model import Project

HELP = "finish (or discard) what a killed `deps bump` left behind"
DESCRIPTION = "Finish a landing cut short, or remove the copy a bump killed earlier left in .nemo-rl/."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    deps.common(parser)
    deps.writes(parser)


def run(project: Project, args: argparse.Namespace) -> int:
    with state_dir.project_lock(project.root, wait=not args.no_wait):
        return _recover(project.root)


def _recover(project: Path) -> int:
    found = journal.leftovers(project, locked=True)
    if not found:
        print("nothing to recover")
        return 0
    for left in found:
        path = left.staging
        if left.has_journal:  # guard: fast-recover-finishes-a-landing-cut
            moves = journal.read_journal(path).moves
            moved = journal.finish(project, path)
            before = [name for name in moves if name not in moved]  # guard: fast-recover-says-what-had-moved-before
            print(f"finished an interrupted landing: moved {', '.join(moved) or 'nothing more'} ("
                  + (f"{', '.join(before)} had moved before the interruption)" if before else
                     "nothing had moved before the interruption)"))
        else:
            shutil.rmtree(path, ignore_errors=True)
            print(f"removed {path} (left by a bump or `deps patches` killed before it changed anything)")
    state_dir.remove_empty(project / state_dir.STAGING_ROOT)
    return 0
