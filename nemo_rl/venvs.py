"""Python executables for workers, and materialising them as environments created with uv.

A worker declares how its Python is obtained (one of PY_EXECUTABLES); `create_local_venv` turns a
`uv run ...` declaration into a real environment under NEMO_RL_VENV_DIR and returns its interpreter, so
process launchers (Ray actors, subprocesses) can start it directly without uv on their hot path.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

from nemo_rl.deps import uv
from nemo_rl.errors import NemoRLError

PROJECT_DIR = Path(__file__).resolve().parent.parent


class PY_EXECUTABLES:
    SYSTEM = sys.executable
    # --locked: a worker must run exactly what uv.lock says, never a silently re-resolved set.
    BASE = "uv run --locked"
    # No --reinstall: uv compares the installed fork commit with the lock and reinstalls only on change.
    MCORE = "uv run --locked --extra mcore"


def default_venv_dir() -> Path:
    return Path(os.environ.get("NEMO_RL_VENV_DIR") or PROJECT_DIR / "venvs")


def _sync_flags(py_executable: str) -> list[str]:
    words = shlex.split(py_executable)
    if words[:2] != ["uv", "run"]:
        raise NemoRLError(
            f"cannot make an environment for py_executable {py_executable!r}",
            "use one of PY_EXECUTABLES (SYSTEM, or a `uv run ...` command such as BASE or MCORE)",
        )
    flags = words[2:]
    # `uv run` options that `uv sync` also takes; anything else (a command to run) makes no sense here.
    allowed = {"--locked", "--frozen", "--extra", "--group", "--all-extras", "--no-dev", "--offline"}
    for word in flags:
        if word.startswith("-") and word.split("=")[0] not in allowed:
            raise NemoRLError(f"py_executable {py_executable!r} has {word!r}, which `uv sync` does not take",
                              f"use only {', '.join(sorted(allowed))}")
    return flags


def create_local_venv(py_executable: str, venv_name: str, *, project: Path | None = None) -> str:
    """Create (or bring up to date) the worker environment `venv_name`; return its python's path."""
    if py_executable == PY_EXECUTABLES.SYSTEM:
        return sys.executable
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", venv_name):
        raise NemoRLError(f"invalid venv name {venv_name!r}", "use letters, digits, '.', '_' and '-' only")
    flags = _sync_flags(py_executable)
    project = project or PROJECT_DIR
    if not (project / "pyproject.toml").exists():
        raise NemoRLError(f"no pyproject.toml in {project} to build {venv_name!r} from",
                          "pass project= the nemo-rl checkout (workers are built from its uv.lock)")
    venv_dir = default_venv_dir() / venv_name
    uv.venv(venv_dir, python=sys.executable)
    uv.sync(project, flags=flags, environment=venv_dir)
    python = venv_dir / "bin" / "python"
    if not python.exists():
        raise NemoRLError(f"uv sync finished but {python} does not exist", f"remove {venv_dir} and try again")
    return str(python)
