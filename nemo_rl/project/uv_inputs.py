"""What uv reads of a project beyond its requirements, where nemo-rl must look before handing the project to uv.

Checking uv.lock (`deps status`, `doctor`) must run nothing of the checkout, yet uv runs a build backend to read
any metadata that is not static, and finds files to run around the project: a workspace root above it, members
below it, a `.venv`, a `.python-version`. So uv checks copies of pyproject.toml and uv.lock in a directory of
nemo-rl's own (under its cache, where no checkout's file is near), and what the copy cannot show (a dynamic
[project], a workspace, a relative path source) is named instead of checked.

A lock made in a staging copy (`deps bump`, `deps patches`) sees the project from `.nemo-rl/<staging>/`: uv reads
a uv.toml instead of pyproject.toml's [tool.uv] (the derived [[tool.uv.dependency-metadata]] with it), and it
resolves the relative paths of a uv.toml or of a path source from the directory it locks in: both are refused.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from nemo_rl import settings, values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import lockfile

COPIED = ("pyproject.toml", "uv.lock", "uv.toml")  # what uv reads to check a lock, copied where present
COPY_MAX = 64 << 20


def lock_problem(project: Path, forks: list[lockfile.Fork]) -> str | None:
    """What is wrong with uv.lock as a whole (missing, or not matching pyproject.toml), with the fix; None when
    it is current. A fork whose rev is not a full SHA is never handed to uv (status reports it as a bad pin)."""
    from nemo_rl import uv

    if not (project / "uv.lock").exists():
        return (f"{project / 'uv.lock'} is missing: `git checkout uv.lock` restores the committed one "
                "(or `uv lock` makes a new one)")
    if any(f.bad_rev for f in forks):
        return None
    unseen = unchecked(project)
    if unseen is not None:
        return (f"uv.lock was not checked against pyproject.toml: {unseen}, which nemo-rl does not check (it would "
                "run the checkout's code or read files around it); read what it names, then `uv lock --check` if "
                "that code is trusted")
    why = _checked_copy(project)
    if why is None:
        return None
    if why.startswith(uv.BUILD_REFUSED):
        return (f"uv.lock was not checked against pyproject.toml: {why} (a build runs the source's own code); "
                "read what pyproject.toml's sources name, then `uv lock --check` if that code is trusted")
    if why.startswith(uv.OTHER_PYTHON):
        return (f"uv.lock was not checked against pyproject.toml: {why}; run nemo-rl with a Python that "
                "requires-python allows (installed apart from this checkout, e.g. `uvx --python 3.12 --from "
                "<nemo-rl> nemo-rl ...`)")
    if why == uv.STALE:
        return "uv.lock does not match pyproject.toml: run `uv lock` and commit it"
    return (f"uv could not check uv.lock against pyproject.toml offline: {why}; with the network, `uv lock "
            "--check` says whether it is current")


def _checked_copy(project: Path) -> str | None:
    """uv.lock_mismatch on copies of the files uv reads, in a private directory under nemo-rl's cache: no member,
    backend, hook, .venv or .python-version of the checkout beside them, and no workspace root above them."""
    from nemo_rl import uv

    root = settings.cache_dir() / "lock-check"
    root.mkdir(mode=0o700, exist_ok=True)
    copy = Path(tempfile.mkdtemp(dir=root))
    try:
        for name in COPIED:
            try:
                data = values.read_plain_file(project / name, COPY_MAX)
            except FileNotFoundError:
                continue
            except OSError as exc:
                return f"cannot read {project / name}: {exc}"
            (copy / name).write_bytes(data)
        return uv.lock_mismatch(copy)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def unchecked(project: Path) -> str | None:
    """What of the project a check from copies of pyproject.toml and uv.lock cannot see without running the
    checkout's code (a dynamic [project]: its build backend gives it) or reading files around it (a workspace's
    members, a relative path source), in a few words; None when there is nothing."""
    path = project / "pyproject.toml"
    dynamic = lockfile.table(lockfile.load_toml(path).get("project"), "[project]", path).get("dynamic")
    if dynamic:
        return f"{path.name} has a dynamic [project] ({dynamic!r:.80}), which only its build backend gives"
    uv_table, _ = lockfile.tool_tables(project)
    if "workspace" in uv_table:
        return f"{path.name} declares a uv workspace ([tool.uv.workspace]), whose members' metadata is theirs"
    return _local_source(project)


def _local_source(project: Path) -> str | None:
    """A [tool.uv.sources] entry that names a directory by a path relative to the project, or a workspace member."""
    path = project / "pyproject.toml"
    uv_table, _ = lockfile.tool_tables(project)
    for name, source in lockfile.table(uv_table.get("sources"), "[tool.uv.sources]", path).items():
        for entry in source if isinstance(source, list) else [source]:
            if not isinstance(entry, dict):
                continue
            local = entry.get("path")
            if isinstance(local, str) and not Path(local).is_absolute():
                return f"{path.name}: [tool.uv.sources] {name} is the relative path {local!r:.100}"
            if entry.get("workspace"):
                return f"{path.name}: [tool.uv.sources] {name} is a workspace member"
    return None


def require_stageable(project: Path, command: str) -> None:
    """Refuses, with what to do, a project that a lock in a staging copy would see differently from uv in the
    project itself: a uv.toml, a workspace, or a path source given as a relative path (other relative paths in
    [tool.uv], such as find-links, fail loudly in uv there)."""
    if (project / "uv.toml").exists() or (project / "uv.toml").is_symlink():
        raise NemoRLError(
            f"{project / 'uv.toml'} exists: uv reads it instead of pyproject.toml's [tool.uv] (the forks' derived "
            f"[[tool.uv.dependency-metadata]] among them), and `{command}` locks in a staging copy where its "
            "relative paths would name other directories",
            "move its settings into pyproject.toml's [tool.uv]; a mirror or index for this machine goes in "
            "~/.config/uv/uv.toml or UV_INDEX, which every lock reads")
    uv_table, _ = lockfile.tool_tables(project)
    if "workspace" in uv_table:  # its members are not in the staging copy, and the copy would be one of them
        raise NemoRLError(f"{project / 'pyproject.toml'} declares a uv workspace ([tool.uv.workspace]), which "
                          f"`{command}` cannot lock from its staging copy under .nemo-rl/",
                          "lock the workspace with `uv lock --upgrade-package DIST` after editing the pin by hand")
    local = _local_source(project)
    if local is not None:
        raise NemoRLError(f"{local}; `{command}` locks in a staging copy under .nemo-rl/, from where it names "
                          "another directory", "give it an absolute path (or a git or URL source) while it is "
                          "locked this way")
