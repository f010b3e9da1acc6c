"""What uv reads of a project beyond its requirements, where nemo-rl must look before handing the project to uv.

A project whose own metadata (or a workspace member's) is dynamic has it only from its build backend, which runs
the project's code, and `uv lock --check --no-build` still runs it: a pull request can make it so. And a lock made
in a staging copy (`deps bump`, `deps patches`) sees the project from `.nemo-rl/<staging>/`: uv reads a uv.toml
instead of pyproject.toml's [tool.uv] (the derived [[tool.uv.dependency-metadata]] with it), and it resolves the
relative paths of a uv.toml or of a path source from the directory it locks in.
"""

from __future__ import annotations

from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.project import lockfile

MEMBERS_MAX = 200  # workspace members looked at: a glob that matches more is refused, not walked


def lock_problem(project: Path, forks: list[lockfile.Fork]) -> str | None:
    """What is wrong with uv.lock as a whole (missing, or not matching pyproject.toml), with the fix; None when
    it is current. A fork whose rev is not a full SHA is never handed to uv (status reports it as a bad pin)."""
    from nemo_rl import uv

    if not (project / "uv.lock").exists():
        return (f"{project / 'uv.lock'} is missing: `git checkout uv.lock` restores the committed one "
                "(or `uv lock` makes a new one)")
    if any(f.bad_rev for f in forks):
        return None
    built = built_metadata(project)
    why = f"{uv.BUILD_REFUSED}: {built}" if built is not None else uv.lock_mismatch(project)
    if why is not None and why.startswith(uv.BUILD_REFUSED):
        return (f"uv.lock was not checked against pyproject.toml: {why} (a build runs the source's own code); "
                "read what pyproject.toml names (its sources, its own metadata, its workspace), then "
                "`uv lock --check` if that code is trusted")
    if why is not None and why.startswith(uv.OTHER_PYTHON):
        return (f"uv.lock was not checked against pyproject.toml: {why}; run nemo-rl from the project's own "
                "environment (`uv run nemo-rl ...`)")
    return f"uv.lock does not match pyproject.toml ({why}): run `uv lock` and commit it" if why else None


def built_metadata(project: Path) -> str | None:
    """Why uv would run a build backend of this checkout to read its metadata (the project's, or a workspace
    member's `[project] dynamic`), in a few words; None when every such [project] is static."""
    path = project / "pyproject.toml"
    data = lockfile.load_toml(path)
    why = _dynamic(data, path)
    if why is not None:
        return why
    workspace = lockfile.table(lockfile.table(data.get("tool"), "[tool]", path).get("uv"), "[tool.uv]", path
                               ).get("workspace")
    members = lockfile.table(workspace, "[tool.uv.workspace]", path).get("members", [])
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        return f"{path.name}: [tool.uv.workspace] members is not a list of strings"
    found = sorted({p for pattern in members for p in project.glob(pattern) if (p / "pyproject.toml").is_file()})
    if len(found) > MEMBERS_MAX:
        return f"{path.name}: [tool.uv.workspace] members match {len(found)} directories"
    for member in found:
        member_path = member / "pyproject.toml"
        why = _dynamic(lockfile.load_toml(member_path), member_path)
        if why is not None:
            return why
    return None


def _dynamic(data: dict, path: Path) -> str | None:
    dynamic = lockfile.table(data.get("project"), "[project]", path).get("dynamic")
    return f"{path} has a dynamic [project] ({dynamic!r:.80})" if dynamic else None


def require_stageable(project: Path, command: str) -> None:
    """Refuses, with what to do, a project that a lock in a staging copy would see differently from uv in the
    project itself: a uv.toml, or a path source given as a relative path."""
    if (project / "uv.toml").exists() or (project / "uv.toml").is_symlink():
        raise NemoRLError(
            f"{project / 'uv.toml'} exists: uv reads it instead of pyproject.toml's [tool.uv] (the forks' derived "
            f"[[tool.uv.dependency-metadata]] among them), and `{command}` locks in a staging copy where its "
            "relative paths would name other directories",
            "move its settings into pyproject.toml's [tool.uv]; a mirror or index for this machine goes in "
            "~/.config/uv/uv.toml or UV_INDEX, which every lock reads")
    path = project / "pyproject.toml"
    uv_table, _ = lockfile.tool_tables(project)
    for name, source in lockfile.table(uv_table.get("sources"), "[tool.uv.sources]", path).items():
        for entry in source if isinstance(source, list) else [source]:
            local = entry.get("path") if isinstance(entry, dict) else None
            if isinstance(local, str) and not Path(local).is_absolute():
                raise NemoRLError(
                    f"{path.name}: [tool.uv.sources] {name} is the relative path {local!r:.100}; `{command}` locks "
                    "in a staging copy under .nemo-rl/, from where it names another directory",
                    f"give {name} an absolute path (or a git or URL source) while it is locked this way")
