"""A worker's Python (one of PY_EXECUTABLES), mapped to a verified environment's interpreter."""

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
    BASE = "uv run --locked"
    MCORE = "uv run --locked --extra mcore"


def sync_flags(py_executable: str) -> list[str]:
    words = shlex.split(py_executable)
    if words[:2] != ["uv", "run"]:
        raise NemoRLError(f"cannot make an environment for py_executable {py_executable!r}",
                          "use one of PY_EXECUTABLES (SYSTEM, BASE, MCORE)")
    flags = words[2:]
    for word in flags:
        if word.startswith("-") and word.split("=")[0] not in SYNC_OPTIONS:
            raise NemoRLError(f"py_executable {py_executable!r} has {word!r}, which `uv sync` does not take",
                              f"use only {', '.join(sorted(SYNC_OPTIONS))}")
    return flags


def create_local_venv(py_executable: str, venv_name: str, *, project: Path | None = None) -> str:
    """The python of the verified environment for `py_executable`; `venv_name` only names it in messages."""
    from nemo_rl.project.model import Project
    from nemo_rl.workers import environments

    if py_executable == PY_EXECUTABLES.SYSTEM:
        return sys.executable
    project = project or CHECKOUT_DIR
    if not (project / "pyproject.toml").exists():
        raise NemoRLError(f"no pyproject.toml in {project} to build {venv_name!r} from",
                          "pass project= the nemo-rl checkout")
    return str(environments.ensure(Project.read(project), sync_flags(py_executable)).python)
