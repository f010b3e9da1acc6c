"""`nemo-rl envs`: the worker environments of this project. One module per verb; here, what they share: the
group's help, the options and the PY_EXECUTABLE argument."""

from __future__ import annotations

import argparse

from nemo_rl import values, verbose

HELP = "worker environments: list, build ahead of time, verify, prune, pack for offline nodes"
DESCRIPTION = ("Worker environments live under $NEMO_RL_VENV_DIR (default venvs/ in the checkout), one per key: a hash "
               "of the checkout's path, uv.lock, the sync flags, Python, platform and any developed fork. Build them "
               "ahead of time for images; pack a bundle on a builder for nodes without internet (docs/workers.md).")


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
    """The `uv sync` flags of a PY_EXECUTABLE argument: BASE, MCORE or a `uv run ...` string."""
    from nemo_rl.errors import UsageError
    from nemo_rl.workers import executables

    names = {"BASE": executables.PY_EXECUTABLES.BASE, "MCORE": executables.PY_EXECUTABLES.MCORE}
    command = names.get(py_executable, py_executable)
    if not command.startswith("uv run"):
        raise UsageError(f"unknown PY_EXECUTABLE {py_executable!r}", f"use one of {', '.join(names)} or a "
                         "`uv run ...` string")
    return executables.sync_flags(command)
