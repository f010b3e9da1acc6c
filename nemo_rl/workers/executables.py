"""Python executables for workers, and turning them into keyed, verified environments (workers.environments).

A worker declares how its Python is obtained (one of PY_EXECUTABLES); `create_local_venv` turns a
`uv run ...` declaration into the environment for this project's uv.lock and returns its interpreter, so
process launchers (Ray actors, subprocesses) start it directly without uv on their hot path.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.settings import CHECKOUT_DIR

SYNC_OPTIONS = {"--locked", "--frozen", "--extra", "--group", "--all-extras", "--no-dev", "--offline",
                "--no-install-package"}


class PY_EXECUTABLES:
    SYSTEM = sys.executable
    # --locked: a worker must run exactly what uv.lock says, never a silently re-resolved set.
    BASE = "uv run --locked"
    # No --reinstall: uv compares the installed fork commit with the lock and reinstalls only on change.
    MCORE = "uv run --locked --extra mcore"


def sync_flags(py_executable: str) -> list[str]:
    words = shlex.split(py_executable)
    if words[:2] != ["uv", "run"]:
        raise NemoRLError(
            f"cannot make an environment for py_executable {py_executable!r}",
            "use one of PY_EXECUTABLES (SYSTEM, or a `uv run ...` command such as BASE or MCORE)",
        )
    flags = words[2:]
    # `uv run` options that `uv sync` also takes; anything else (a command to run) makes no sense here.
    for word in flags:
        if word.startswith("-") and word.split("=")[0] not in SYNC_OPTIONS:
            raise NemoRLError(f"py_executable {py_executable!r} has {word!r}, which `uv sync` does not take",
                              f"use only {', '.join(sorted(SYNC_OPTIONS))}")
    return flags


def create_local_venv(py_executable: str, venv_name: str, *, project: Path | None = None) -> str:
    """The verified worker environment for `py_executable` and the project's uv.lock; return its python.

    `venv_name` names the worker in messages only: environments are keyed by what defines them (uv.lock,
    flags, Python, platform), so two names with the same definition share one environment.
    """
    from nemo_rl.project.model import Project
    from nemo_rl.workers import environments

    if py_executable == PY_EXECUTABLES.SYSTEM:
        return sys.executable
    project = project or CHECKOUT_DIR
    if not (project / "pyproject.toml").exists():
        raise NemoRLError(f"no pyproject.toml in {project} to build {venv_name!r} from",
                          "pass project= the nemo-rl checkout (workers are built from its uv.lock)")
    return str(environments.ensure(Project.read(project), sync_flags(py_executable)).python)
