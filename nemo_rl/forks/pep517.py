"""A fork's PEP 517 hooks, each run time-limited in a `uv run --with` environment."""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyproject_hooks
from packaging.requirements import InvalidRequirement, Requirement

from nemo_rl import uv, values
from nemo_rl.errors import NemoRLError

# a large fork's metadata takes seconds, a wheel with a compiled extension minutes
METADATA_TIMEOUT_S, WHEEL_TIMEOUT_S = 600.0, 3600.0
OUTPUT_LIMIT = 1 << 20
PYPROJECT_LIMIT = 4 << 20
# keep the `uv run --with` command line far below the kernel's limit on arguments
REQUIRES_LIMIT, REQUIREMENT_LIMIT = 200, 1000
OUTPUT_KEPT = 64 << 10
FIX_FORK = "pick another commit, or fix the fork"
FIX_BACKEND = "pick another commit, or fix the fork's build backend"


def call_backend(source: Path, out: Path, rev: str, wheel: bool, resolved: set[tuple[str, ...]]) -> str:
    """Run build_wheel or prepare_metadata_for_build_wheel; return the name it wrote into `out`."""
    requires, backend, backend_path = _build_system(source, rev)

    def runner(cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None) -> None:
        key = tuple(sorted(requires))
        uv.run_with(requires, ["python", *cmd[1:]], cwd=Path(cwd or source), python=sys.executable,  # guard: fast-a-build-backend-runs-under-a-time
                    extra_env=extra_environ or {}, offline=key in resolved,
                    timeout=WHEEL_TIMEOUT_S if wheel else METADATA_TIMEOUT_S, keep=OUTPUT_KEPT)
        resolved.add(key)
        _output(Path(cmd[3]))  # guard: fast-a-hook-s-output-json-is-an-object

    try:
        hooks = pyproject_hooks.BuildBackendHookCaller(str(source), backend, backend_path, runner=runner)
        requires.extend(_checked(hooks.get_requires_for_build_wheel(), rev))  # guard: fast-the-backend-s-get-requires-for
        name = hooks.build_wheel(str(out)) if wheel else hooks.prepare_metadata_for_build_wheel(str(out))
        return _produced(out, name)  # guard: fast-the-hook-s-return-value-names-what
    except (NemoRLError, pyproject_hooks.BackendUnavailable, pyproject_hooks.HookMissing, ValueError) as exc:
        # ValueError: a backend-path outside the tree (pyproject_hooks refuses it)
        what = "build a wheel" if wheel else "produce metadata"
        raise NemoRLError(f"the fork's build backend could not {what} at {rev[:12]}",
                          f"read its output:\n{_said(exc)}") from exc


def _said(exc: Exception) -> str:
    if isinstance(exc, NemoRLError):
        return exc.what
    if isinstance(exc, pyproject_hooks.BackendUnavailable):  # guard: bump-a-backend-that-cannot-be-imported
        lines = [line for line in exc.traceback.splitlines() if line.strip()]
        name = exc.backend_name or "its build backend"
        return f"{name} could not be imported" + (f": {lines[-1].strip()}" if lines else "")
    return str(exc)


def _output(control: Path) -> dict:
    path = control / "output.json"
    try:
        data = json.loads(values.read_plain_file(path, OUTPUT_LIMIT))  # guard: fast-a-backend-s-files-are-read-through
        if not isinstance(data, dict):
            raise ValueError(f"a {type(data).__name__}, not an object")
    except (OSError, ValueError, RecursionError) as exc:
        raise NemoRLError(f"the hook's answer ({path.name}) is unreadable: {str(exc)[:200]}", FIX_BACKEND) from exc
    return data


def _produced(out: Path, name: object) -> str:
    if (not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\\" in name
            or not (out / name).exists()):
        raise NemoRLError(f"the hook returned {name!r:.100}, not the name of what it wrote", FIX_BACKEND)
    return name


def _build_system(source: Path, rev: str) -> tuple[list[str], str, list[str] | None]:
    bad = NemoRLError(f"the fork's pyproject.toml at {rev[:12]} has no valid [build-system]", FIX_FORK)
    try:
        text = values.read_plain_file(source / "pyproject.toml", PYPROJECT_LIMIT).decode()  # guard: reader-the-fork-s-pyproject-toml
        build = tomllib.loads(text).get("build-system", {})
    except FileNotFoundError:
        build = {}
    except OSError as exc:
        raise NemoRLError(f"the fork's pyproject.toml at {rev[:12]} is not a plain file: {exc}", FIX_FORK) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise NemoRLError(f"the fork's pyproject.toml at {rev[:12]} does not parse: {exc}", FIX_FORK) from exc
    backend = build.get("build-backend", "setuptools.build_meta:__legacy__") if isinstance(build, dict) else None
    backend_path = build.get("backend-path") if isinstance(build, dict) else None
    if not isinstance(backend, str) or not (backend_path is None or (  # guard: fast-backend-path-is-a-list-of-strings
            isinstance(backend_path, list) and all(isinstance(p, str) for p in backend_path))):
        raise bad
    return _checked(build.get("requires", ["setuptools>=40.8.0"]), rev), backend, backend_path


def _checked(requirements: object, rev: str) -> list[str]:
    try:
        if not isinstance(requirements, list):
            raise InvalidRequirement(repr(requirements))
        if len(requirements) > REQUIRES_LIMIT:  # guard: fast-build-requirements-are-bounded-in
            raise InvalidRequirement(f"{len(requirements)} requirements (more than {REQUIRES_LIMIT})")
        if long := next((r for r in requirements if isinstance(r, str) and len(r) > REQUIREMENT_LIMIT), None):  # guard: fast-build-requirements-are-bounded-in-2
            raise InvalidRequirement(f"{long[:80]!r}... is longer than {REQUIREMENT_LIMIT} characters")
        parsed = [Requirement(r) for r in requirements]  # guard: fast-build-requirements-are-pep
        if direct := [str(r) for r in parsed if r.url]:  # guard: never-direct-reference-build
            raise InvalidRequirement(f"direct references are not taken: {', '.join(direct)}")
        return [str(r) for r in parsed]
    except (InvalidRequirement, TypeError) as exc:
        raise NemoRLError(f"the fork's build requirements at {rev[:12]} are not valid PEP 508: {exc}",
                          FIX_FORK) from exc
