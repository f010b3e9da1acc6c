"""What a fork declares at a commit, asked of its build backend, cached per commit."""

from __future__ import annotations

import shutil
import tomllib
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from nemo_rl import codec, git, values
from nemo_rl.errors import NemoRLError
from nemo_rl.forks import declared, fork_cache, git_history, lock_markers, pep517, scratch

VERSION = 6
METADATA_LIMIT = 16 << 20
FIX_BACKEND = pep517.FIX_BACKEND


def project_table(pyproject_text: str | None) -> dict:
    """The fork's static [project] table; {} when absent or unparsable."""
    try:
        table = tomllib.loads(pyproject_text).get("project", {}) if pyproject_text else {}
    except tomllib.TOMLDecodeError:
        return {}
    return table if isinstance(table, dict) else {}


def require_builds(pyproject_text: str | None, distribution: str, where: str) -> None:
    """Raise NemoRLError when the static [project] names another distribution."""
    name = project_table(pyproject_text).get("name")
    if isinstance(name, str) and canonicalize_name(name) != canonicalize_name(distribution):  # guard: bump-renamed-distribution
        raise NemoRLError(f"{where} builds distribution {name!r}, not {distribution!r}",
                          f"pick a commit that still builds {distribution}, or rename the dependency, its "
                          f"[tool.uv.sources] entry and [tool.nemo-rl.forks.{distribution}] to {name}")


@dataclass(frozen=True)
class Metadata:
    """A commit's METADATA; `requires` is keyed by canonical name (full text for a repeat)."""

    name: str
    version: str
    requires: dict[str, str]
    requires_python: str | None = None
    extras: dict[str, tuple[str, ...]] | None = None
    placeholders: tuple[str, ...] = ()


@dataclass(frozen=True)
class Files:
    """The files a commit's wheel installs."""

    files: tuple[str, ...]
    placeholders: tuple[str, ...] = ()


def _parsed(lines: list[str]) -> list[tuple[str, Requirement]]:
    parsed = []
    for line in lines:
        try:
            parsed.append((line, Requirement(line)))
        except InvalidRequirement:
            continue
    return parsed


def _extras(provided: list[str], lines: list[str]) -> dict[str, tuple[str, ...]]:
    pairs = _parsed(lines)
    return {extra: tuple(line for line, req in pairs if not lock_markers.base_requirement(req)  # guard: extras-each-keeps-only-what-it-brings
                         and lock_markers.with_extra(req, extra))
            for extra in sorted({str(canonicalize_name(e)) for e in provided})}


def _requirements(lines: list[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for _, req in _parsed(lines):
        if not lock_markers.base_requirement(req):  # guard: guard-drift-leaves-out-extras
            continue
        result[str(req) if canonicalize_name(req.name) in result else canonicalize_name(req.name)] = str(req)  # guard: fork-metadata-a-name-required-twice
    return result


def declares(metadata: Metadata, rev: str, distribution: str, dropped: frozenset[str], *,
             extras: bool = False) -> declared.Declares:
    """What the fork declares at `rev`; NemoRLError when it builds another distribution."""
    if canonicalize_name(metadata.name) != canonicalize_name(distribution):  # guard: bump-the-metadata-names-the-distribution
        raise NemoRLError(f"the fork at {rev[:12]} builds distribution {metadata.name!r:.100}, not {distribution!r}",
                          f"pick a commit that still builds {distribution}, or fix the fork's build backend")
    return declared.declares_from(metadata.version, metadata.requires_python, metadata.requires, rev, distribution,
                                  dropped, metadata.extras if extras else None)


def read(repo: Path, rev: str) -> Metadata:
    """The fork's metadata at `rev`, already fetched into the cache `repo`."""
    return read_all(repo, [rev])[0]


def read_all(repo: Path, revs: list[str]) -> list[Metadata]:
    return [record.metadata for record in _cached(repo, revs, wheel=False)]


def shipped_files(repo: Path, rev: str) -> frozenset[str]:
    return frozenset(files(repo, rev).files)


@dataclass(frozen=True)
class _Record:
    metadata: Metadata
    files: Files | None = None


def _cache_path(repo: Path, rev: str) -> Path:
    return repo / "nemo-rl-metadata" / f"{rev}.json"


def files(repo: Path, rev: str) -> Files:
    """The files `rev`'s wheel installs, and those built empty, their blobs unserved."""
    found = _cached(repo, [rev], wheel=True)[0].files
    assert found is not None
    return found


def _cached(repo: Path, revs: list[str], wheel: bool) -> list[_Record]:
    found = {rev: record for rev in revs if (record := codec.read(_cache_path(repo, rev), _Record, VERSION))
             and (record.files is not None or not wheel)}
    for rev, record in _build(repo, [rev for rev in dict.fromkeys(revs) if rev not in found], wheel):
        codec.write(_cache_path(repo, rev), record, VERSION)
        found[rev] = record
    return [found[rev] for rev in revs]


def _build(repo: Path, revs: list[str], wheel: bool) -> Iterator[tuple[str, _Record]]:
    resolved: set[tuple[str, ...]] = set()
    for rev in revs:
        tree = git_history.fetched_tree(repo, rev, ["fork", "upstream"])
        with scratch.directory(tree.size * (3 if wheel else 2)) as tmp:
            source, out = tmp / "src", tmp / "out"
            try:
                # worktree names in the repository would race; the build itself runs unlocked
                with fork_cache.holding(repo):
                    git_history.check_out(repo, tree, source)
                out.mkdir()
                produced = out / pep517.call_backend(source, out, rev, wheel, resolved)
                yield rev, (_read_wheel(produced, tree.placeholders) if wheel
                            else _Record(_metadata(_bounded(produced / "METADATA"), tree.placeholders)))
            finally:
                shutil.rmtree(source, ignore_errors=True)
                with fork_cache.holding(repo):
                    git.git(["worktree", "prune"], repo=repo, check=False)  # guard: metadata-a-worktree-left-by-a-killed


def _bounded(path: Path) -> str:
    try:
        return values.read_plain_file(path, METADATA_LIMIT).decode(errors="replace")  # guard: fast-metadata-is-read-like-a-hook-s
    except (OSError, ValueError) as exc:
        raise NemoRLError(f"the fork's build backend wrote no METADATA file under {METADATA_LIMIT} bytes "
                          f"({path.name}: {str(exc)[:200]})", FIX_BACKEND) from exc


def _metadata(text: str, placeholders: Iterable[str]) -> Metadata:
    message = Parser().parsestr(text)
    if not message["Name"] or not message["Version"]:  # guard: fast-metadata-has-a-name-and-a-version
        raise NemoRLError("the fork's METADATA has no Name or no Version", FIX_BACKEND)
    try:
        Version(message["Version"])  # guard: fast-metadata-s-version-is-pep
    except InvalidVersion as exc:
        raise NemoRLError(f"the fork's METADATA has Version {message['Version']!r:.100}, not "
                          "a PEP 440 version", FIX_BACKEND) from exc
    lines = message.get_all("Requires-Dist") or []
    return Metadata(message["Name"], message["Version"], _requirements(lines), message["Requires-Python"],
                    _extras(message.get_all("Provides-Extra") or [], lines), tuple(placeholders))


def _read_wheel(wheel: Path, placeholders: Iterable[str]) -> _Record:
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise NemoRLError(f"the fork's wheel {wheel.name} does not open: {exc}",
                          FIX_BACKEND) from exc
    with archive:
        names = archive.namelist()
        info = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
        if info is None or archive.getinfo(info).file_size > METADATA_LIMIT:
            raise NemoRLError(f"the fork's wheel {wheel.name} has no .dist-info/METADATA "
                              f"under {METADATA_LIMIT} bytes", FIX_BACKEND)
        metadata = archive.read(info).decode(errors="replace")
    return _Record(_metadata(metadata, placeholders),
                   Files(tuple(sorted(n for n in names if ".dist-info/" not in n)), tuple(placeholders)))


@dataclass(frozen=True)
class Drift:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[tuple[str, str], ...]

    def lines(self) -> list[str]:
        lines = [f"  requirements (the fork's own metadata): {len(self.added)} added, {len(self.removed)} removed, "
                 f"{len(self.changed)} changed"]
        lines += [f"    + {r}" for r in self.added]
        lines += [f"    - {r}" for r in self.removed]
        lines += [f"    ~ {old} -> {new}" for old, new in self.changed]
        return lines


def drift(old_lines: Iterable[str], new_lines: Iterable[str]) -> Drift:
    old, new = _requirements(list(old_lines)), _requirements(list(new_lines))
    added = [new[n] for n in sorted(new.keys() - old.keys())]
    removed = [old[n] for n in sorted(old.keys() - new.keys())]
    changed = [(old[n], new[n]) for n in sorted(old.keys() & new.keys()) if old[n] != new[n]]  # guard: guard-drift-s-changed
    return Drift(tuple(added), tuple(removed), tuple(changed))
