"""`nemo-rl deps recover`: finish or discard what a killed bump left in .nemo-rl/."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from nemo_rl.project import landing


def run(project: Path, args: argparse.Namespace) -> int:
    with landing.project_lock(project, wait=not args.no_wait):
        return _recover(project)


def _recover(project: Path) -> int:
    found = landing.leftovers(project, locked=True)
    if not found:
        print("nothing to recover: no interrupted bump in this project")
        return 0
    for path, journal in found:
        if journal:  # killed while landing: every staged file is complete, so landing the rest is correct
            moved = landing.finish(project, path)
            print(f"finished an interrupted landing: {', '.join(moved)}")
        else:  # killed before landing: the project was never touched
            shutil.rmtree(path, ignore_errors=True)
            print(f"removed {path} (a bump killed before it changed anything)")
    landing.remove_empty(project / landing.STAGING_ROOT)
    return 0
