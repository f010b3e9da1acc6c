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

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from nemo_rl import locks, settings, values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project

COPIED = ("pyproject.toml", "uv.lock", "uv.toml")  # what uv reads to check a lock, copied where present
COPY_MAX = lockfile.PROJECT_FILE_MAX
CHECK_PREFIX = "check-"
NOT_MADE = "(not made) "  # what _checked_copy says when uv was not run at all
NOT_CHECKED = "uv.lock was not checked against pyproject.toml: "


def lock_problem(project: Project, forks: Sequence[lockfile.Fork]) -> str | None:
    """What is wrong with uv.lock as a whole (missing, or not matching pyproject.toml), with the fix; None when
    it is current. A fork whose rev is not a full SHA is never handed to uv (status reports it as a bad pin)."""
    from nemo_rl import uv

    if project.lock_bytes is None:
        return (f"{project.lock_path} is missing: `git checkout uv.lock` restores the committed one "
                "(or `uv lock` makes a new one)")
    if any(f.bad_rev for f in forks):
        return None
    unseen = unchecked(project)  # guard: trust-what-a-copy-cannot-show-is-named
    if unseen is not None:
        return (f"{NOT_CHECKED}{unseen}, which nemo-rl does not check (it would "
                "run the checkout's code or read files around it); read what it names, then `uv lock --check` if "
                "that code is trusted")
    try:
        root = settings.private_dir("lock-check")
    except NemoRLError as exc:  # a status or a report goes on without its lock check
        return f"{NOT_CHECKED}{exc.what} ({exc.remedy})"
    except OSError as exc:
        return f"{NOT_CHECKED}cannot make a directory for it: {exc}"
    above = _workspace_above(root)
    if above is not None:  # guard: trust-a-workspace-above-nemo-rl-s-cache
        return (f"{NOT_CHECKED}{above}, and uv would take the copies it checks "
                "for one of its members; set NEMO_RL_CACHE_DIR to a directory outside any project")
    why = _checked_copy(project, root)
    if why is None:
        return None
    if why.startswith(uv.BUILD_REFUSED):  # guard: trust-a-lock-check-that-needs-a-build
        return (f"{NOT_CHECKED}{why} (a build runs the source's own code); "
                "read what pyproject.toml's sources name, then `uv lock --check` if that code is trusted")
    if why.startswith(uv.OTHER_PYTHON):  # guard: trust-a-check-on-another-python-says-how
        return (f"{NOT_CHECKED}{why}; run nemo-rl with a Python that "
                "requires-python allows (installed apart from this checkout, e.g. `uvx --python 3.12 --from "
                "<nemo-rl> nemo-rl ...`)")
    if why == uv.STALE:
        return "uv.lock does not match pyproject.toml: run `uv lock` and commit it"
    if why.startswith((uv.UNFINISHED, NOT_MADE)):
        return f"{NOT_CHECKED}{why.removeprefix(NOT_MADE)}"
    return (f"uv could not check uv.lock against pyproject.toml offline: {why}; `uv lock --check` in a checkout "  # guard: trust-uv-lock-is-the-remedy-only-for-a
            "whose code you trust says whether it is current")


def _checked_copy(project: Project, root: Path) -> str | None:
    """uv.lock_mismatch on copies of the files uv reads, in a private directory under nemo-rl's cache: no member,
    backend, hook, .venv or .python-version of the checkout beside them, and no workspace root above them."""
    from nemo_rl import uv

    try:
        for left in root.glob(f"{CHECK_PREFIX}*"):  # a check killed with SIGKILL: nobody holds its copies
            locks.remove_left(left)  # guard: probe-copies-a-killed-lock-check-left
        copy = Path(tempfile.mkdtemp(prefix=CHECK_PREFIX, dir=root))
    except OSError as exc:  # a full disk, a quota: the check is not made, and the report says why
        return f"{NOT_MADE}cannot make a directory for the check in {root}: {exc.strerror}"
    held = None
    try:
        try:
            held = locks.hold(copy)  # guard: probe-a-running-lock-check-s-copy-is
        except (OSError, NemoRLError):  # a filesystem without locks: no sweep removes what it cannot lock either
            pass
        uv_toml = project.root / "uv.toml"
        read = {"pyproject.toml": project.pyproject_bytes, "uv.lock": project.lock_bytes}
        for name in COPIED:
            try:
                data = read[name] if name in read else lockfile.read_bytes(uv_toml)
            except FileNotFoundError:
                continue
            except NemoRLError as exc:
                return f"{NOT_MADE}{exc.what}"
            except OSError as exc:
                return f"{NOT_MADE}cannot read {uv_toml}: {exc}"
            if data is None:  # no uv.lock
                continue
            if name == "pyproject.toml" and not uv_toml.exists():
                data = _settings_here(data)  # guard: trust-uv-settings-above-nemo-rl-s-cache
            try:
                (copy / name).write_bytes(data)
            except OSError as exc:
                return f"{NOT_MADE}cannot copy {name} into {copy}: {exc.strerror}"
        return uv.lock_mismatch(copy)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
        if held is not None:
            os.close(held)


def _settings_here(pyproject: bytes) -> bytes:
    """The copied pyproject.toml with a [tool.uv] table, empty when it had none: uv looks for its settings in the
    nearest uv.toml or [tool.uv] above a project that has neither, and a directory above nemo-rl's cache (/tmp,
    a checkout) is not the checkout's to choose them."""
    import tomllib

    try:
        data = tomllib.loads(pyproject.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return pyproject  # uv says what is wrong with it
    tool = data.get("tool")
    if isinstance(tool, dict) and "uv" in tool:
        return pyproject
    settled = pyproject + b"\n[tool.uv]\n"
    try:
        tomllib.loads(settled.decode())
    except tomllib.TOMLDecodeError:  # `tool` given inline: it cannot take a table after it
        return pyproject
    return settled


def _workspace_above(directory: Path) -> str | None:
    """The first directory above `directory` whose pyproject.toml declares a uv workspace (or cannot be read as
    one), as uv looks for a workspace root above the project it locks: nemo-rl's cache inside a checkout (a CI
    that keeps its caches in the workspace)."""
    for parent in Path(os.path.abspath(directory)).parents:
        path = parent / "pyproject.toml"
        if not os.path.lexists(path):
            continue
        data = _toml_file(Path(os.path.realpath(path)))
        try:
            declared = data is not None and "workspace" in data.get("tool", {}).get("uv", {})
        except AttributeError:  # a `tool` or `tool.uv` that is not a table
            data = None
        if data is None:
            return f"{path} cannot be read, and may declare a uv workspace"
        if declared:  # guard: trust-what-is-above-nemo-rl-s-cache-is
            return f"{path} declares a uv workspace"
    return None


def unchecked(project: Project) -> str | None:
    """What of the project a check from copies of pyproject.toml and uv.lock cannot see without running the
    checkout's code (a dynamic [project]: its build backend gives it) or reading files around it (a workspace's
    members, a relative path source), in a few words; None when there is nothing."""
    path = project.pyproject_path
    dynamic = lockfile.table(project.pyproject.get("project"), "[project]", path).get("dynamic")
    if dynamic:  # guard: trust-a-dynamic-project-is-named
        return f"{path.name} has a dynamic [project] ({dynamic!r:.80}), which only its build backend gives"
    uv_table = project.uv_table
    if "workspace" in uv_table:  # guard: trust-a-workspace-is-named-not-walked
        return f"{path.name} declares a uv workspace ([tool.uv.workspace]), whose members' metadata is theirs"
    uv_toml = _toml_file(project.root / "uv.toml") or {}  # one that does not parse: the check itself says so
    for where, data in [(path.name, project.pyproject), ("uv.toml", uv_toml)]:
        if any("${PROJECT_ROOT}" in text for text in _strings(data)):  # guard: trust-project-root-is-named-not-checked
            return f"{where} names ${{PROJECT_ROOT}}, which in a copy is not the checkout"
    for where, settings_table in [(f"{path.name}'s [tool.uv]", uv_table), ("uv.toml", uv_toml)]:
        relative = _relative_location(settings_table)
        if relative is not None:  # guard: trust-a-relative-find-links-or-index-is
            return f"{where} names {relative!r:.100} relative to the checkout"
    return _local_source(uv_table, git=True)  # guard: trust-a-local-git-source-is-named


def _strings(value: object) -> list[str]:
    """Every string of a parsed TOML document (its comments are not in it)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _toml_file(path: Path) -> dict | None:
    """A TOML file read as a plain file and parsed; None when it is absent or cannot be read as one."""
    import tomllib

    try:
        return tomllib.loads(values.read_plain_file(path, COPY_MAX).decode())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _relative_location(table: dict) -> str | None:
    """A find-links entry or an index URL of uv's settings that is a path relative to the project."""
    indexes = table.get("index")
    listed = [i.get("url") for i in indexes if isinstance(i, dict)] if isinstance(indexes, list) else []
    find_links, extra = table.get("find-links"), table.get("extra-index-url")
    places = [*(find_links if isinstance(find_links, list) else []), table.get("index-url"),
              *(extra if isinstance(extra, list) else []), *listed]
    for place in places:
        if not isinstance(place, str):
            continue
        local = place[5:] if place.lower().startswith("file:") and not place[5:].startswith("//") else place
        if "://" not in local and not os.path.isabs(os.path.expanduser(local)):
            return place
    return None


def _local_source(uv_table: Mapping[str, object], *, git: bool = False) -> str | None:
    """A [tool.uv.sources] entry (of pyproject.toml's [tool.uv], `uv_table`) that names a directory by a path
    relative to the project, or a workspace member; with `git`, also a git source on this machine (`file://`, or a
    path): a repository the checkout may hold, whose checkout uv would make in the user's cache."""
    sources = uv_table.get("sources")
    for name, source in (sources.items() if isinstance(sources, dict) else ()):
        for entry in source if isinstance(source, list) else [source]:
            if not isinstance(entry, dict):
                continue
            url = entry.get("git")
            if git and isinstance(url, str) and not _remote(url):
                return f"pyproject.toml: [tool.uv.sources] {name} is the local git repository {url!r:.100}"
            local = entry.get("path")
            if isinstance(local, str) and not Path(local).is_absolute():  # guard: staging-a-relative-path-source-is
                return f"pyproject.toml: [tool.uv.sources] {name} is the relative path {local!r:.100}"
            if entry.get("workspace"):
                return f"pyproject.toml: [tool.uv.sources] {name} is a workspace member"
    return None


def _remote(url: str) -> bool:
    """Whether a git URL names another host (https, http, ssh, git, or scp's user@host:path), as uv reads it:
    a scheme in any case, after an optional `git+`. Anything else (file, a path, an unknown scheme) is local."""
    import re
    from urllib.parse import urlsplit

    text = url.strip()
    text = text[4:] if text.lower().startswith("git+") else text  # guard: trust-a-local-git-repository-is-named
    if re.fullmatch(r"[\w.+-]+@[\w.-]+:.*", text):
        return True
    parts = urlsplit(text)  # its scheme in lower case
    return parts.scheme in ("https", "http", "ssh", "git") and bool(parts.netloc)


def require_stageable(project: Path, uv_table: Mapping[str, object], command: str) -> None:
    """Refuses, with what to do, a project that a lock in a staging copy would see differently from uv in the
    project itself (`uv_table`: its pyproject.toml's [tool.uv], as read): a uv.toml, a workspace, or a path source
    given as a relative path (other relative paths in [tool.uv], such as find-links, fail loudly in uv there)."""
    if (project / "uv.toml").exists() or (project / "uv.toml").is_symlink():  # guard: staging-a-uv-toml-is-refused-before-a
        raise NemoRLError(
            f"{project / 'uv.toml'} exists: uv reads it instead of pyproject.toml's [tool.uv] (the forks' derived "
            f"[[tool.uv.dependency-metadata]] among them), and `{command}` locks in a staging copy where its "
            "relative paths would name other directories",
            "move its settings into pyproject.toml's [tool.uv]; a mirror or index for this machine goes in "
            "~/.config/uv/uv.toml or UV_INDEX, which every lock reads")
    if "workspace" in uv_table:  # guard: staging-a-workspace-is-refused-before-a; its members are not in the staging copy, and the copy would be one of them
        raise NemoRLError(f"{project / 'pyproject.toml'} declares a uv workspace ([tool.uv.workspace]), which "
                          f"`{command}` cannot lock from its staging copy under .nemo-rl/",
                          "lock the workspace with `uv lock --upgrade-package DIST` after editing the pin by hand")
    local = _local_source(uv_table)
    if local is not None:
        raise NemoRLError(f"{local}; `{command}` locks in a staging copy under .nemo-rl/, from where it names "
                          "another directory", "give it an absolute path (or a git or URL source) while it is "
                          "locked this way")
