"""uv.lock checked from copies in a private directory, so no code of the checkout runs."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from nemo_rl import locks, settings, uv, values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project

COPIED = ("pyproject.toml", "uv.lock", "uv.toml")
COPY_MAX = lockfile.PROJECT_FILE_MAX
CHECK_PREFIX = "check-"
NOT_MADE = "(not made) "  # uv did not run
NOT_CHECKED = "uv.lock was not checked against pyproject.toml: "


def lock_problem(project: Project) -> str | None:
    """What is wrong with uv.lock as a whole, with the fix; None when it is current."""
    if project.lock_bytes is None:
        return f"{project.lock_path} is missing: run `git checkout uv.lock` or `uv lock`"
    if any(f.bad_rev for f in project.forks_as_pinned):
        return None
    unseen = unchecked(project)  # guard: trust-what-a-copy-cannot-show-is-named
    if unseen is not None:
        return f"{NOT_CHECKED}{unseen}; read it, then `uv lock --check` if that code is trusted"
    try:
        root = settings.private_dir("lock-check")
    except NemoRLError as exc:
        return f"{NOT_CHECKED}{exc.what} ({exc.remedy})"
    except OSError as exc:
        return f"{NOT_CHECKED}cannot make a directory for it: {exc}"
    above = _workspace_above(root)
    if above is not None:  # guard: trust-a-workspace-above-nemo-rl-s-cache
        return f"{NOT_CHECKED}{above}; set NEMO_RL_CACHE_DIR to a directory outside any project"
    why = _checked_copy(project, root)
    if why is None:
        return None
    if why.startswith(uv.BUILD_REFUSED):  # guard: trust-a-lock-check-that-needs-a-build
        return f"{NOT_CHECKED}{why}; read the sources it names, then `uv lock --check` if that code is trusted"
    if why.startswith(uv.OTHER_PYTHON):  # guard: trust-a-check-on-another-python-says-how
        return (f"{NOT_CHECKED}{why}; run nemo-rl with a Python that requires-python allows (`uvx --python 3.12 --from "
                "<nemo-rl> nemo-rl ...`)")
    if why == uv.STALE:
        return "uv.lock does not match pyproject.toml: run `uv lock` and commit it"
    if why.startswith((uv.UNFINISHED, NOT_MADE)):
        return f"{NOT_CHECKED}{why.removeprefix(NOT_MADE)}"
    return (f"uv could not check uv.lock against pyproject.toml offline: {why}; run `uv lock --check` if the "  # guard: trust-uv-lock-is-the-remedy-only-for-a
            "checkout's code is trusted")


def _checked_copy(project: Project, root: Path) -> str | None:
    try:
        for left in root.glob(f"{CHECK_PREFIX}*"):
            locks.remove_left(left)  # guard: probe-copies-a-killed-lock-check-left
        copy = Path(tempfile.mkdtemp(prefix=CHECK_PREFIX, dir=root))
    except OSError as exc:
        return f"{NOT_MADE}cannot make a directory for the check in {root}: {exc.strerror}"
    held = None
    try:
        with contextlib.suppress(OSError, NemoRLError):
            held = locks.hold(copy)  # guard: probe-a-running-lock-check-s-copy-is
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
            if data is None:
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
    """The pyproject.toml with a [tool.uv] table, so uv takes no settings from a directory above."""
    try:
        data = tomllib.loads(pyproject.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return pyproject
    tool = data.get("tool")
    if isinstance(tool, dict) and "uv" in tool:
        return pyproject
    settled = pyproject + b"\n[tool.uv]\n"
    try:
        tomllib.loads(settled.decode())
    except tomllib.TOMLDecodeError:  # an inline `tool` takes no table after it
        return pyproject
    return settled


def _workspace_above(directory: Path) -> str | None:
    """Why a pyproject.toml above `directory` may declare a uv workspace, or None."""
    for parent in Path(os.path.abspath(directory)).parents:
        path = parent / "pyproject.toml"
        if not os.path.lexists(path):
            continue
        data = _toml_file(Path(os.path.realpath(path)))
        try:
            declared = data is not None and "workspace" in data.get("tool", {}).get("uv", {})
        except AttributeError:
            data = None
        if data is None:
            return f"{path} cannot be read, and may declare a uv workspace"
        if declared:  # guard: trust-what-is-above-nemo-rl-s-cache-is
            return f"{path} declares a uv workspace"
    return None


def unchecked(project: Project) -> str | None:
    """What a check from copies cannot see."""
    path = project.pyproject_path
    dynamic = lockfile.table(project.pyproject.get("project"), "[project]", path).get("dynamic")
    if dynamic:  # guard: trust-a-dynamic-project-is-named
        return f"{path.name} has a dynamic [project] ({dynamic!r:.80})"
    uv_table = project.uv_table
    if "workspace" in uv_table:  # guard: trust-a-workspace-is-named-not-walked
        return f"{path.name} declares a uv workspace ([tool.uv.workspace])"
    uv_toml = _toml_file(project.root / "uv.toml") or {}
    for where, data in [(path.name, project.pyproject), ("uv.toml", uv_toml)]:
        if any("${PROJECT_ROOT}" in text for text in _strings(data)):  # guard: trust-project-root-is-named-not-checked
            return f"{where} names ${{PROJECT_ROOT}}"
    for where, settings_table in [(f"{path.name}'s [tool.uv]", uv_table), ("uv.toml", uv_toml)]:
        relative = _relative_location(settings_table)
        if relative is not None:  # guard: trust-a-relative-find-links-or-index-is
            return f"{where} names {relative!r:.100} relative to the checkout"
    return _local_source(uv_table, git=True)  # guard: trust-a-local-git-source-is-named


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [text for item in items for text in _strings(item)]


def _toml_file(path: Path) -> dict | None:
    try:
        return tomllib.loads(values.read_plain_file(path, COPY_MAX).decode())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _relative_location(table: dict) -> str | None:
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
    """A relative path or workspace member source; with `git`, also a git source on this machine."""
    sources = uv_table.get("sources")
    for key, source in (sources.items() if isinstance(sources, dict) else ()):
        name = f"{key:.100}"
        name = values.printable(name)  # guard: a-source-key-is-printed-escaped
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
    text = url.strip()
    text = text[4:] if text.lower().startswith("git+") else text  # guard: trust-a-local-git-repository-is-named
    if re.fullmatch(r"[\w.+-]+@[\w.-]+:.*", text):
        return True
    parts = urlsplit(text)
    return parts.scheme in ("https", "http", "ssh", "git") and bool(parts.netloc)


def require_stageable(project: Path, uv_table: Mapping[str, object], command: str) -> None:
    """Refuse a project that a lock in a staging copy would see differently."""
    if (project / "uv.toml").exists() or (project / "uv.toml").is_symlink():  # guard: staging-a-uv-toml-is-refused-before-a
        raise NemoRLError(f"{project / 'uv.toml'} exists: uv reads it instead of pyproject.toml's [tool.uv]",
                          "move its settings into pyproject.toml's [tool.uv] or ~/.config/uv/uv.toml")
    if "workspace" in uv_table:  # guard: staging-a-workspace-is-refused-before-a
        raise NemoRLError(f"{project / 'pyproject.toml'} declares a uv workspace, which `{command}` cannot lock",
                          "edit the pin by hand, then run `uv lock --upgrade-package DIST`")
    local = _local_source(uv_table)
    if local is not None:
        raise NemoRLError(f"{local}, which `{command}` cannot lock from a staging copy",
                          "give it an absolute path or a git or URL source")
