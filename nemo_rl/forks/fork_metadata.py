"""What a fork itself declares at a commit, asked of its own build backend through PEP 517 (pep517.py: pypa's
pyproject_hooks runs get_requires_for_build_wheel, then prepare_metadata_for_build_wheel or build_wheel), not
parsed from setup.py or requirements files by hand. A wheel (its file list) is built only when asked for:
Megatron-LM's compiles an extension.

uv locks our [[tool.uv.dependency-metadata]] entry instead of this, so a bump compares the two.
"""

from __future__ import annotations

import json
import shutil
import tomllib
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from nemo_rl import git, values
from nemo_rl.errors import NemoRLError
from nemo_rl.forks import declared, fork_cache, git_history, lock_markers, pep517, scratch
from nemo_rl.project.state_dir import write_atomic

# Cached per commit beside the fork cache: the metadata and the wheel's file list, each with the placeholders
# the build had to use.
# the metadata file name changed when Requires-Python joined it: an older cached answer lacks it
METADATA, FILES = "metadata-v5.json", "files.json"  # v5: each extra's requirements too
METADATA_LIMIT = 16 << 20  # a METADATA file the backend wrote: long descriptions included


def project_table(pyproject_text: str | None) -> dict:
    """The fork's static [project] table ({} when it has none or it does not parse: setup.py forks)."""
    try:
        table = tomllib.loads(pyproject_text).get("project", {}) if pyproject_text else {}
    except tomllib.TOMLDecodeError:
        return {}
    return table if isinstance(table, dict) else {}


def require_builds(pyproject_text: str | None, distribution: str, where: str) -> None:
    """Several NeMo branches rename nemo-toolkit to nemo-tron: pinning or developing one drops our distribution
    (seen in the fork's static [project] table, when it has one)."""
    name = project_table(pyproject_text).get("name")
    if isinstance(name, str) and canonicalize_name(name) != canonicalize_name(distribution):  # guard: bump-renamed-distribution
        raise NemoRLError(
            f"{where} builds distribution {name!r}, not {distribution!r} (its pyproject.toml renames it)",
            f"pick a commit that still builds {distribution}, or rename the dependency, its [tool.uv.sources] "
            f"entry and [tool.nemo-rl.forks.{distribution}] to {name} first",
        )


@dataclass(frozen=True)
class Metadata:
    name: str
    version: str
    # canonical name -> the requirement as the fork writes it (the fork's own extras excluded); a name required
    # again (split by marker) is keyed by its requirement's text
    requires: Mapping[str, str]
    requires_python: str | None = None
    # each extra the fork provides (canonical) -> the requirements only that extra brings, as the fork writes them
    extras: Mapping[str, tuple[str, ...]] | None = None


def _extras(provided: list[str], lines: list[str]) -> dict[str, list[str]]:
    """Each extra the METADATA provides, with the requirements it brings beyond the base ones (a requirement whose
    marker holds with that extra on some platform and Python, and with none on no platform)."""
    parsed = []
    for line in lines:
        try:
            parsed.append((line, Requirement(line)))
        except InvalidRequirement:
            continue
    extras = {}
    for extra in sorted({str(canonicalize_name(e)) for e in provided}):
        extras[extra] = [line for line, req in parsed if not lock_markers.base_requirement(req)  # guard: extras-each-keeps-only-what-it-brings
                         and lock_markers.with_extra(req, extra)]
    return extras


def _requirements(lines: list[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if not lock_markers.base_requirement(req):  # guard: guard-drift-leaves-out-extras
            continue  # optional features of the fork, not what `import` needs
        # a name required twice (split by marker or extras) keeps both: the second under its full text
        result[str(req) if canonicalize_name(req.name) in result else canonicalize_name(req.name)] = str(req)  # guard: fork-metadata-a-name-required-twice
    return result


def declares(metadata: Metadata, rev: str, distribution: str, dropped: frozenset[str], *,
             extras: bool = False) -> declared.Declares:
    """What the fork declares at `rev` for the derived entry, checked before anything is locked: the METADATA
    names our distribution (a setup.py or dynamic [project] renames it where require_builds cannot see), and no
    requirement is a direct reference the project does not drop (declared.declares_from). `extras`: with each
    extra's requirements (a fork without a derived entry, whose extras uv locks from its own metadata)."""
    if canonicalize_name(metadata.name) != canonicalize_name(distribution):  # guard: bump-the-metadata-names-the-distribution
        raise NemoRLError(
            f"the fork at {rev[:12]} builds distribution {metadata.name!r:.100}, not {distribution!r} (the METADATA "
            "its build backend writes names it)",
            f"pick a commit that still builds {distribution}, or fix the fork's build backend")
    return declared.declares_from(metadata.version, metadata.requires_python, metadata.requires, rev, distribution,
                                  dropped, metadata.extras if extras else None)


def read(repo: Path, rev: str) -> Metadata:
    """The fork's metadata at `rev` (already fetched into the cache `repo`). A commit's metadata never changes,
    so it is kept beside the fork cache: a bump reads the old commit's for free."""
    return read_all(repo, [rev])[0]


def read_all(repo: Path, revs: list[str]) -> list[Metadata]:
    """`read` of each of `revs`; those not cached are built, each in a checkout of its own."""
    return [Metadata(d["name"], d["version"], d["requires"], d.get("requires_python"),
                     {extra: tuple(lines) for extra, lines in d["extras"].items()})
            for d in _cached(repo, revs, METADATA)]


def shipped_files(repo: Path, rev: str) -> frozenset[str]:
    """The files the distribution built from `rev` installs: the file list of the wheel the fork's own build
    backend makes (what `uv sync` installs), cached per commit like the metadata."""
    return frozenset(_cached(repo, [rev], FILES)[0]["files"])


def placeholders(repo: Path, rev: str, what: str = "wheel") -> list[str]:
    """Files of `rev` whose blobs the fork's server lacked: the wheel (or the metadata) was built with them empty."""
    return list(_cached(repo, [rev], FILES if what == "wheel" else METADATA)[0].get("placeholders", []))


def _cache_path(repo: Path, rev: str, suffix: str) -> Path:
    return repo / "nemo-rl-metadata" / f"{rev}.{suffix}"


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _load(path: Path, suffix: str) -> dict | None:
    """A cached answer, or None when it is absent or damaged (truncated, another shape, not UTF-8, a version
    that does not parse): it is rebuilt, never trusted."""
    try:
        data = json.loads(values.read_plain_file(path, METADATA_LIMIT))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not _strings(data.get("placeholders", [])):  # guard: fast-a-cached-answer-of-another-shape-is
        return None
    if suffix == FILES:
        return data if _strings(data.get("files")) else None
    requires, python, extras = data.get("requires"), data.get("requires_python"), data.get("extras")
    try:
        if not (isinstance(data.get("name"), str) and isinstance(requires, dict) and _strings(list(requires))  # guard: extras-a-damaged-cached-extras-table-is
                and _strings(list(requires.values())) and (python is None or isinstance(python, str))
                and isinstance(extras, dict) and _strings(list(extras)) and all(map(_strings, extras.values()))):
            return None
        Version(data["version"])  # guard: fast-a-cached-version-is-pep
        for line in [*requires.values(), *(line for lines in extras.values() for line in lines)]:
            Requirement(line)
    except (InvalidVersion, InvalidRequirement, TypeError):
        return None
    return data


def _cached(repo: Path, revs: list[str], suffix: str) -> list[dict]:
    found = {rev: data for rev in revs if (data := _load(_cache_path(repo, rev, suffix), suffix)) is not None}
    for rev, built in _build(repo, [rev for rev in dict.fromkeys(revs) if rev not in found], wheel=suffix == FILES):
        for kind, data in built.items():
            write_atomic(_cache_path(repo, rev, kind), json.dumps(data))
        found[rev] = built[suffix]
    return [found[rev] for rev in revs]


def _build(repo: Path, revs: list[str], wheel: bool) -> Iterator[tuple[str, dict[str, dict]]]:
    """Each of `revs` built in a checkout of its own: {METADATA: ...} from the metadata hook, or {METADATA: ...,
    FILES: ...} from a wheel."""
    resolved: set[tuple[str, ...]] = set()
    for rev in revs:
        tree = git_history.fetched_tree(repo, rev, ["fork", "upstream"])
        # the tree and what a build writes beside it (a wheel: a copy and an archive)
        with scratch.directory(tree.size * (3 if wheel else 2)) as tmp:
            source, out = tmp / "src", tmp / "out"
            try:
                # a worktree is made and pruned under the cache's lock (worktrees' names in the repository would
                # race); the build itself runs unlocked, beside other work in the same cache
                with fork_cache.holding(repo):
                    git_history.check_out(repo, tree, source)
                out.mkdir()
                produced = out / pep517.call_backend(source, out, rev, wheel, resolved)
                if wheel:
                    yield rev, _read_wheel(produced, tree.placeholders)
                else:
                    yield rev, {METADATA: _metadata(_bounded(produced / "METADATA"), tree.placeholders)}
            finally:  # this worktree, and any a killed command left registered
                shutil.rmtree(source, ignore_errors=True)
                with fork_cache.holding(repo):
                    git.git(["worktree", "prune"], repo=repo, check=False)  # guard: metadata-a-worktree-left-by-a-killed


def _bounded(path: Path) -> str:
    """A METADATA file the backend wrote, refused when it is not a regular file (a symlink, a FIFO, a device) or
    larger than METADATA_LIMIT."""
    try:
        return values.read_plain_file(path, METADATA_LIMIT).decode(errors="replace")  # guard: fast-metadata-is-read-like-a-hook-s
    except (OSError, ValueError) as exc:
        raise NemoRLError(f"the fork's build backend wrote no METADATA file under {METADATA_LIMIT} bytes "
                          f"({path.name}: {str(exc)[:200]})", "pick another commit, or fix the fork's build backend"
                          ) from exc


def _metadata(text: str, placeholders: list[str]) -> dict:
    message = Parser().parsestr(text)
    if not message["Name"] or not message["Version"]:  # guard: fast-metadata-has-a-name-and-a-version
        raise NemoRLError("the METADATA the fork's build backend wrote has no Name or no Version",
                          "pick another commit, or fix the fork's build backend")
    try:  # PEP 440, checked here: the derived entry and uv.lock carry it
        Version(message["Version"])  # guard: fast-metadata-s-version-is-pep
    except InvalidVersion as exc:
        raise NemoRLError(f"the METADATA the fork's build backend wrote has Version {message['Version']!r:.100}, not "
                          "a PEP 440 version", "pick another commit, or fix the fork's build backend") from exc
    lines = message.get_all("Requires-Dist") or []
    return {"name": message["Name"], "version": message["Version"], "requires": _requirements(lines),
            "extras": _extras(message.get_all("Provides-Extra") or [], lines),
            "requires_python": message["Requires-Python"], "placeholders": placeholders}


def _read_wheel(wheel: Path, placeholders: list[str]) -> dict[str, dict]:
    """Both answers from one wheel: its files and its metadata (the same as the metadata hook's, PEP 517 says)."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise NemoRLError(f"the wheel the fork's build backend made ({wheel.name}) does not open: {exc}",
                          "pick another commit, or fix the fork's build backend") from exc
    with archive:
        names = archive.namelist()
        info = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
        if info is None or archive.getinfo(info).file_size > METADATA_LIMIT:
            raise NemoRLError(f"the wheel the fork's build backend made ({wheel.name}) has no .dist-info/METADATA "
                              f"under {METADATA_LIMIT} bytes", "pick another commit, or fix the fork's build backend")
        metadata = archive.read(info).decode(errors="replace")
    return {METADATA: _metadata(metadata, placeholders),
            FILES: {"files": sorted(n for n in names if ".dist-info/" not in n), "placeholders": placeholders}}


@dataclass(frozen=True)
class Drift:
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[tuple[str, str], ...]
    uncovered: tuple[str, ...]  # added requirements our declared entry does not name

    def lines(self, distribution: str) -> list[str]:
        lines = [f"  requirements (the fork's own metadata): {len(self.added)} added, {len(self.removed)} removed, "
                 f"{len(self.changed)} changed"]
        lines += [f"    + {r}{'   NOT COVERED' if canonicalize_name(Requirement(r).name) in self.uncovered else ''}"
                  for r in self.added]
        lines += [f"    - {r}" for r in self.removed]
        lines += [f"    ~ {old} -> {new}" for old, new in self.changed]
        if self.uncovered:
            lines.append(f"  not covered by [[tool.uv.dependency-metadata]] {distribution}: {', '.join(self.uncovered)}"
                         f" - if the fork imports them, add them to that entry's requires-dist in pyproject.toml, "
                         f"relock, then `nemo-rl deps verify {distribution}`")
        return lines


def drift(old_lines: Iterable[str], new_lines: Iterable[str], declared: declared.Entry | None) -> Drift:
    """The fork's requirements at two commits compared (Metadata.requires' values, or [declares] requires-dist)."""
    covered = {canonicalize_name(Requirement(r).name) for r in (declared.requires_dist if declared else ())}
    old, new = _requirements(list(old_lines)), _requirements(list(new_lines))
    added_names = sorted(new.keys() - old.keys())
    added = [new[n] for n in added_names]
    removed = [old[n] for n in sorted(old.keys() - new.keys())]
    changed = [(old[n], new[n]) for n in sorted(old.keys() & new.keys()) if old[n] != new[n]]  # guard: guard-drift-s-changed
    # without a declared entry uv locks the fork's own metadata, so nothing can be left uncovered
    uncovered = sorted({str(canonicalize_name(Requirement(r).name)) for r in added} - covered) \
        if declared is not None else []
    return Drift(tuple(added), tuple(removed), tuple(changed), tuple(uncovered))
