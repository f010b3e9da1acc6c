"""`nemo-rl envs verify`: verify an existing environment."""

from __future__ import annotations

import argparse

from nemo_rl import envs
from nemo_rl.project.model import Project

HELP = "verify the environment of a PY_EXECUTABLE (it must exist)"
DESCRIPTION = HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    envs.common(parser, py_executable=True)


def run(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl.workers import environments

    flags = envs.flags(args.py_executable)
    found = environments.describe(environments.slot(environments.key_for(project, flags)).path)
    if found is None:
        print(f"no environment for {' '.join(flags)} with this uv.lock: `uv run nemo-rl envs build` makes it")
        return 1
    environments.verify(found, project)
    print(f"ok: {found.python}")
    return 0
