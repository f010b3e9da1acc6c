"""The bounded reader of project files, and the checks of fork pins and locked packages."""

from __future__ import annotations

import functools
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload
from urllib.parse import parse_qs, urlsplit, urlunsplit

from nemo_rl import values
from nemo_rl.errors import NemoRLError, command

MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z", re.ASCII)


@dataclass(frozen=True)
class Fork:
    """One fork, checked; `rev` is a full SHA unless `bad_rev` says why not."""

    distribution: str
    url: str
    rev: str
    branch: str | None
    upstream_url: str | None
    upstream_branch: str
    base: str | None
    bad_rev: str | None = None
    subdirectory: str | None = None
    module: str | None = None
    entry_points: tuple[str, ...] = ()
    component: str | None = None
    remedy: str | None = None


@dataclass(frozen=True)
class LockedPackage:
    name: str
    version: str | None
    git: str | None = None  # `<url>?rev=<rev>#<commit>`
    other: str | None = None  # any other source, shown in messages

    @classmethod
    def of(cls, name: str, version: str | None, source: dict) -> LockedPackage:
        git = source.get("git")
        return cls(name, version, git, None) if isinstance(git, str) else cls(name, version, None, f"{source!r:.120}")

    @property
    def commit(self) -> str | None:
        return urlsplit(self.git).fragment or None if self.git is not None else None

    def other_source(self, fork: Fork) -> str | None:
        """uv.lock's source of the fork when it is not pyproject.toml's, else None."""
        if self.git is None:
            return f"{self.other} (not a git source)"
        parts = urlsplit(self.git)
        where = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        expected = {"rev": [fork.rev], **({"subdirectory": [fork.subdirectory]} if fork.subdirectory else {})}  # guard: source-pyproject-s-subdirectory-is
        if where != fork.url or parse_qs(parts.query, keep_blank_values=True) != expected:  # guard: source-the-locked-url-is-pyproject-s
            return self.git.split("#", 1)[0]
        return None


class ProjectNotFound(NemoRLError):
    """No nemo-rl project at or above the directory."""


PROJECT_FILE_MAX = 64 << 20


def _put_back(path: Path) -> str:
    if path.name == "uv.lock":
        return f"run {command('cd {project} && rm uv.lock && uv lock', project=path.parent)}"
    if path.parent.parent.name == "patches":
        fix = command("cd {project} && rm {records} && nemo-rl deps patches {dist}", project=path.parent.parent.parent,
                      records=f"patches/{path.parent.name}/{path.name}", dist=path.parent.name)
        return f"run {fix}"
    fix = command("cd {project} && rm {name} && git checkout COMMIT -- {name}", project=path.parent, name=path.name)
    return f"run {fix}, COMMIT a commit that holds it"


def read_bytes(path: Path) -> bytes:
    """A regular project file of at most PROJECT_FILE_MAX bytes, through a link as uv reads it."""
    target = Path(os.path.realpath(path))
    try:
        return values.read_plain_file(target, PROJECT_FILE_MAX)  # guard: project-files-through-the-bounded-reader
    except values.NotAPlainFile as exc:
        what = f"{path} is a symbolic link to {os.readlink(path)}, which" if os.path.islink(path) else str(path)
        raise NemoRLError(f"{what} {str(exc).removeprefix(f'{target} ')}", _put_back(path)) from exc


def missing(path: Path) -> NemoRLError:
    if os.path.islink(path):
        return NemoRLError(f"{path} is a symbolic link to {os.readlink(path)}, which does not exist", _put_back(path))
    return NemoRLError(f"{path} does not exist", "run from the project directory or pass --project DIR")


def decoded(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NemoRLError(f"{path} is not valid UTF-8 (byte {exc.start}: {exc.object[exc.start:exc.start + 1]!r})",
                          f"save {path.name} as UTF-8") from exc


def parsed(data: bytes, path: Path) -> dict:
    try:
        return tomllib.loads(decoded(data, path))
    except tomllib.TOMLDecodeError as exc:
        raise NemoRLError(f"cannot parse {path}: {exc}", f"fix the TOML syntax in {path.name}") from exc


def read_text(path: Path) -> str:
    try:
        data = read_bytes(path)
    except FileNotFoundError as exc:
        raise missing(path) from exc
    return decoded(data, path)


def load_toml(path: Path) -> dict:
    """A TOML file of patches/, parsed once per version; callers must not mutate it."""
    try:
        info = path.stat()
        return _parsed_once(path, info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size)
    except FileNotFoundError as exc:
        raise missing(path) from exc


@functools.cache
def _parsed_once(path: Path, *version: object) -> dict:
    return parsed(read_bytes(path), path)


def _shape(value: object, where: str, path: Path, kind: str) -> NemoRLError:
    return NemoRLError(f"{path.name}: {where} must be {kind}, found {type(value).__name__} {value!r:.60}",
                       f"fix {where} in {path}")


def table(value: object, where: str, path: Path) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _shape(value, where, path, "a table")
    return value


@overload
def string(value: object, where: str, path: Path, required: Literal[True]) -> str: ...
@overload
def string(value: object, where: str, path: Path, required: bool = False) -> str | None: ...
def string(value: object, where: str, path: Path, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise _shape(value, where, path, "a string")
    return value


def _fork(dist: str, source: object, meta: dict, path: Path, strict: bool) -> Fork:
    where = f"[tool.nemo-rl.forks.{dist}]"
    where = values.printable(where)  # guard: a-fork-key-is-printed-escaped
    values.distribution_name(dist, where)  # guard: trust-fork-key-is-a-distribution-name
    if not isinstance(source, dict) or "git" not in source or "rev" not in source:
        raise NemoRLError(f"{where} has no matching git source with a rev in [tool.uv.sources]",
                          f'add `{dist} = {{ git = "<url>", rev = "<40-hex sha>" }}` to [tool.uv.sources]')
    rev = string(source["rev"], f"[tool.uv.sources] {dist}.rev", path, True)
    bad_rev = None
    try:
        values.full_sha(rev, f"[tool.uv.sources] {dist}.rev")  # guard: trust-rev-is-a-full-sha
    except NemoRLError as exc:
        if strict:
            raise
        bad_rev = exc.what
    branch = string(meta.get("branch") or source.get("branch"), f"{where} branch", path)
    upstream_url = string(meta.get("upstream-url"), f"{where} upstream-url", path)
    upstream_branch = string(meta.get("upstream-branch", "main"), f"{where} upstream-branch", path, True)
    base = string(meta.get("base"), f"{where} base", path)
    module = string(meta.get("module"), f"{where} module", path)
    entry_points = meta.get("entry-points", [])
    if not isinstance(entry_points, list):  # guard: fork-entry-points-is-a-list
        raise NemoRLError(f"{path.name}: {where} entry-points must be a list, found {entry_points!r:.60}",
                          f'write entry-points = ["megatron.core"] in {path}')
    component = string(meta.get("component"), f"{where} component", path)
    if component is not None and not values.DISTRIBUTION_NAME.match(component):  # guard: fork-component-is-a-name
        raise NemoRLError(f"{path.name}: {where} component {component!r:.60} is not a name",
                          f"write a name such as megatron in {path}")
    return Fork(
        distribution=dist,
        url=values.git_url(string(source["git"], f"[tool.uv.sources] {dist}.git", path, True),
                           f"[tool.uv.sources] {dist}.git"),
        rev=rev,
        branch=values.branch_name(branch, f"{where} branch") if branch is not None else None,
        upstream_url=values.git_url(upstream_url, f"{where} upstream-url") if upstream_url is not None else None,
        upstream_branch=values.branch_name(upstream_branch, f"{where} upstream-branch"),
        base=values.full_sha(base, f"{where} base") if base is not None else None,
        bad_rev=bad_rev,
        subdirectory=string(source.get("subdirectory"), f"[tool.uv.sources] {dist}.subdirectory", path),
        module=_module_name(module, f"{where} module", path) if module is not None else None,
        entry_points=tuple(_module_name(string(m, f"{where} entry-points", path, True), f"{where} entry-points", path)
                           for m in entry_points),
        component=component,
        remedy=string(meta.get("remedy"), f"{where} remedy", path),
    )


def _module_name(value: str, where: str, path: Path) -> str:
    if not MODULE_NAME.match(value):  # guard: fork-module-is-a-dotted-name
        raise NemoRLError(f"{path.name}: {where}: {value!r:.60} is not a module name",
                          f"write a module name such as megatron.core in {path}")
    return value


def forks_of(path: Path, uv_table: dict, tables: dict[str, dict], *, strict: bool) -> tuple[Fork, ...]:
    """Every fork of `tables`, checked; `strict=False` keeps one whose rev is bad, marked."""
    sources = table(uv_table.get("sources"), "[tool.uv.sources]", path)
    return tuple(_fork(dist, sources.get(dist), meta, path, strict) for dist, meta in tables.items())
