"""Collect the environment facts `nemo-rl doctor` prints. Nothing here raises: every fault becomes a field."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

from nemo_rl import extras
from nemo_rl.deps import lockfile, uv
from nemo_rl.deps.status import commit_mismatch
from nemo_rl.errors import NemoRLError

SCHEMA_VERSION = 1


def _torch() -> dict:
    try:
        import torch  # noqa: PLC0415 - heavy, and optional for `nemo-rl deps`
    except Exception as exc:  # a broken CUDA install can raise OSError from torch's own import
        return {"installed": False, "version": None, "cuda_available": False, "cuda_version": None,
                "error": f"{type(exc).__name__}: {exc}"}
    try:
        cuda = bool(torch.cuda.is_available())
    except Exception:  # a driver problem must not hide that torch itself works
        cuda = False
    return {"installed": True, "version": torch.__version__, "cuda_available": cuda,
            "cuda_version": torch.version.cuda, "error": None}


def _uv() -> dict:
    try:
        return {"path": uv.find_uv_bin(), "version": uv.version(), "error": None}
    except NemoRLError as exc:
        return {"path": None, "version": None, "error": exc.what}


def _project(start: Path | None) -> Path | None:
    if start is not None:  # asked for explicitly: a wrong path is an error, not a silent fallback
        return lockfile.find_project(start)
    for candidate in (None, Path(__file__).resolve().parents[2]):
        try:
            return lockfile.find_project(candidate)
        except NemoRLError:
            continue
    return None


def component_state(probe: extras.Probe, locked_commit: str | None) -> tuple[str, str | None]:
    """(state, remedy) of one mcore component against the lock."""
    if not probe.present and not probe.installed:
        return "not installed", extras.SYNC_REMEDY
    if not probe.installed:
        return "broken", f"{extras.SYNC_REMEDY}; if it still fails, the reason above names the missing piece"
    mismatch = commit_mismatch(probe.commit, locked_commit) if locked_commit else None
    return ("env stale", mismatch) if mismatch else ("ok", None)


def collect(project_dir: Path | None = None, extra: str | None = None) -> dict:
    project = _project(project_dir)
    try:
        locked = lockfile.locked_packages(project) if project else {}
    except NemoRLError:
        locked = {}
    components = []
    for key, component in extras.COMPONENTS.items():
        probe = extras.probe(key)
        locked_package = locked.get(component.distribution)
        locked_commit = locked_package.commit if locked_package else None
        state, remedy = component_state(probe, locked_commit)
        components.append({
            "name": key, "distribution": component.distribution, "module": component.module,
            "state": state, "installed": probe.installed, "version": probe.version,
            "installed_commit": probe.commit, "locked_commit": locked_commit,
            "locked_version": locked_package.version if locked_package else None,
            "reason": probe.reason, "remedy": remedy,
        })
    torch_info = _torch()
    problems = []
    if not torch_info["installed"]:
        problems.append(f"torch does not import ({torch_info['error']}): run `uv sync`")
    if extra == "mcore":
        problems += [f"{c['distribution']}: {c['state']}" for c in components if c["state"] != "ok"]
    return {
        "schema": SCHEMA_VERSION,
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "uv": _uv(),
        "torch": torch_info,
        "project": str(project) if project else None,
        "requested_extra": extra,
        "components": components,
        "healthy": not problems,
        "problems": problems,
    }
