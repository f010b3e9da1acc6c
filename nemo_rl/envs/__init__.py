"""`nemo-rl envs`: the worker environments of this project; what its verbs share."""

from __future__ import annotations

import argparse

from nemo_rl import values, verbose

HELP = "worker environments: list, build ahead of time, verify, prune, pack for offline nodes"
DESCRIPTION = ("Worker environments under $NEMO_RL_VENV_DIR, one per checkout, uv.lock and sync flags; a bundle "
               "builds them offline (docs/workers.md).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verbose.add(parser)  # `nemo-rl envs -v VERB` as `nemo-rl envs VERB -v`


def common(parser: argparse.ArgumentParser, py_executable: bool = False) -> None:
    parser.add_argument("--project", type=values.path_argument,
                        help="project directory (default: found from the current one)")
    verbose.add(parser)  # guard: fast-envs-verbs-take-v
    if py_executable:
        parser.add_argument("py_executable", metavar="PY_EXECUTABLE",
                            help="BASE, MCORE, or a `uv run ...` string such as 'uv run --locked --extra mcore'")


def flags(py_executable: str) -> list[str]:
    from nemo_rl.errors import UsageError
    from nemo_rl.workers import executables

    names = {"BASE": executables.PY_EXECUTABLES.BASE, "MCORE": executables.PY_EXECUTABLES.MCORE}
    command = names.get(py_executable, py_executable)
    if not command.startswith("uv run"):
        raise UsageError(f"unknown PY_EXECUTABLE {py_executable!r}", f"use {', '.join(names)} or a `uv run ...` string")
    return executables.sync_flags(command)
