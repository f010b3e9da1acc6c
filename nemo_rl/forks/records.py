"""Making and verifying patches/<dist>/."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nemo_rl import git, values
from nemo_rl.errors import NemoRLError, command
from nemo_rl.forks import declared, fork_cache, fork_metadata, git_history, metadata_check, patch_ids
from nemo_rl.forks.record_files import (
    INDEX,
    Index,
    Listed,
    Record,
    index_for,
    index_name,
    patch_filename,
    read_index,
    read_record,
    read_records,
    relative_dir,
    render_index,
)
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project
from nemo_rl.project.state_dir import write_atomic

NOT_REGULAR = "not a regular file"


def not_regular(differences: Sequence[Difference]) -> list[str]:
    """The records `differences` found not to be regular files."""
    return [d.expected.split()[0] for d in differences  # "<record> to exist"
            if d.field == "record" and d.found.endswith(NOT_REGULAR)]


def not_regular_fix(distribution: str, name: str) -> str:
    return command("rm {record} && nemo-rl deps patches {dist}", record=f"{relative_dir(distribution)}/{name}",
                   dist=distribution) + " writes it again"
WHY_PLACEHOLDER = "TODO: say what this fork adds over its upstream and why nemo-rl needs it."


@dataclass(frozen=True)
class Difference:
    """One fact that disagrees."""

    file: str
    field: str
    expected: str
    found: str

    def __str__(self) -> str:
        return values.printable(f"{self.file}: {self.field}: expected {self.expected}, found {self.found}")  # guard: terminal-record-differences-show-escapes


def records_dir(project: Path, distribution: str) -> Path:
    """patches/<dist> in `project`; NemoRLError when it, patches/ or an entry is a link."""
    directory = project / relative_dir(distribution)
    real = directory.is_dir() and not directory.is_symlink() and not directory.parent.is_symlink()
    for path in (project / "patches", directory, *(directory.iterdir() if real else ())):
        if path.is_symlink():  # guard: a-linked-patches-or-patches-dist-is
            restore = command("git checkout <a commit that has them> -- {name}", name=path.relative_to(project))
            raise NemoRLError(f"{path} is a symbolic link (to {values.printable(os.readlink(path))})",
                              command("rm {link}", link=path) + f", then {restore} or `nemo-rl deps patches "
                              f"{distribution}` (then write its why-note), and commit")
    return directory


def downstream(repo: Path, fork: lockfile.Fork, pinned: str, trees: Sequence[str] = ()) -> tuple[str, list[str]]:
    """(base, the downstream commits oldest first) of `pinned`, fetched into `repo`."""
    base = git.merge_base(repo, pinned, fork_cache.UPSTREAM_REF.format(branch=fork.upstream_branch))
    shas = git.rev_list(repo, f"{base}..{pinned}")
    git_history.fetch_for_diffs(repo, "fork", shas, trees)
    return base, shas


def describe(repo: Path, shas: list[str]) -> list[Record]:
    """The records of `shas`, numbered in that order; `downstream` fetched their diffs."""
    facts, diffs = git_history.commits(repo, shas), patch_ids.with_diffstats(repo, shas)
    return [Record(number, sha, facts[sha].author, facts[sha].date, facts[sha].subject, diffs[sha].patch_id,
                   diffs[sha].diffstat) for number, sha in enumerate(shas, start=1)]


def compute(repo: Path, fork: lockfile.Fork) -> tuple[str, list[Record]]:
    """(base, records) of the fork's pinned rev."""
    base, shas = downstream(repo, fork, fork.rev)
    return base, describe(repo, shas)


def declares_at(project: Project, repo: Path, fork: lockfile.Fork, rev: str) -> declared.Declares:
    """What the fork declares at `rev`, checked against the project's drops."""
    dropped = frozenset(d.name for d in metadata_check.deltas(project, fork.distribution).drop)
    return fork_metadata.declares(fork_metadata.read(repo, rev), rev, fork.distribution, dropped,
                                  extras=not metadata_check.derives(project, fork.distribution))


def build(previous: Path, old_index: Index | None, fork: lockfile.Fork, pinned: str, base: str,
          records: list[Record], declares: declared.Declares | None = None) -> tuple[Index, list]:
    """The index and records for `pinned`, keeping the notes of `old_index` and `previous`."""
    old_records = read_records(previous) if previous.exists() else {}
    old_notes_by_patch_id = {r.patch_id: r.note for r in old_records.values() if r.note}
    # a rebased commit keeps its patch-id, so its note follows it
    noted = [replace(r, note=old_records[r.commit].note if r.commit in old_records  # guard: guard-notes-follow-a-rebased-commit
                     else old_notes_by_patch_id.get(r.patch_id, "")) for r in records]
    why = old_index.why if old_index and old_index.why.strip() else WHY_PLACEHOLDER
    index = index_for(fork.distribution, fork.url, fork.branch, pinned, fork.upstream_url, fork.upstream_branch,
                      base, why, noted, declares.as_table() if declares else None)
    return index, noted


def write(directory: Path, index: Index, records: list[Record]) -> None:
    """Make `directory` hold exactly `index` and its records."""
    keep = {r.filename for r in records} | {INDEX}
    for stale in directory.iterdir() if directory.exists() else ():
        if stale.is_file() and stale.name not in keep:
            stale.unlink()
    for record in records:
        write_atomic(directory / record.filename, record.render())
    write_atomic(directory / INDEX, render_index(index))


def _pin_differences(name: str, index: Index, fork: lockfile.Fork, locked_commit: str | None,
                     locked_source: str | None = None) -> list[Difference]:
    expected = {"fork-url": fork.url, "branch": fork.branch or "", "pinned": fork.rev,
                "upstream-url": fork.upstream_url or "", "upstream-branch": fork.upstream_branch}
    if fork.base:
        expected["base"] = fork.base
    found = index.facts()
    diffs = [Difference(name, key, f"{value!r} (pyproject.toml)", repr(found[key]))
             for key, value in expected.items() if found[key] != value]  # guard: offline-pins-vs-pyproject
    if locked_commit != fork.rev:  # guard: offline-lock-commit-in-full
        diffs.append(Difference("uv.lock", f"{fork.distribution} commit", f"{fork.rev} (pyproject.toml)",
                                str(locked_commit)))
    if locked_source is not None:  # guard: source-the-offline-check-names-it
        diffs.append(Difference("uv.lock", f"{fork.distribution} source (fix: `uv lock --upgrade-package "
                                f"{fork.distribution}`)", f"{fork.url}?rev={fork.rev} (pyproject.toml)", locked_source))
    return diffs


def _entry_differences(directory: Path, position: int, entry: Listed) -> list[Difference]:
    name = f"{INDEX} [[commit]] #{position}"
    diffs = []
    if entry.number != position:  # guard: offline-entry-number-order
        diffs.append(Difference(name, "number", str(position), str(entry.number)))
    if entry.record != patch_filename(position, entry.subject):
        diffs.append(Difference(name, "record", patch_filename(position, entry.subject), entry.record))
    if Path(entry.record).name != entry.record or entry.record in ("", ".", ".."):  # guard: offline-path-inside-patches-dist
        return [*diffs, Difference(name, "record", f"a file name inside patches/{directory.name}/", repr(entry.record))]
    path = directory / entry.record
    if not path.is_file():  # guard: offline-record-file-exists
        return [*diffs, Difference(name, "record", f"{entry.record} to exist", _found(path))]
    record = read_record(path)
    compared = (("commit", entry.commit, record.commit), ("subject", entry.subject, record.subject),  # guard: offline-record-digest
                ("patch-id", entry.patch_id, record.patch_id), ("digest", entry.digest, record.digest()))
    edited = "the facts' digest (a fact was edited by hand)"
    return diffs + [Difference(entry.record, edited if key == "digest" else key, listed, value)
                    for key, listed, value in compared if listed != value]


def _found(path: Path) -> str:
    """What stands where a regular file should: "missing", or its kind."""
    try:
        return f"{values.file_kind(os.lstat(path).st_mode)}, {NOT_REGULAR}"  # guard: records-a-non-regular-record-is-named
    except FileNotFoundError:
        return "missing"


def declared_differences(project: Project, fork: lockfile.Fork) -> list[Difference]:
    """Where [[tool.uv.dependency-metadata]] is not derived from what the fork declares at the pin."""
    index = read_index(records_dir(project.root, fork.distribution))
    return [Difference(*problem) for problem in metadata_check.problems(project, fork, index)]


def check_offline(project: Project, fork: lockfile.Fork, locked: dict, require_why: bool = True,
                  compare_lock: bool = True, metadata: bool = True) -> list[Difference]:
    """What can be proved without git."""
    directory = records_dir(project.root, fork.distribution)
    rel = index_name(fork.distribution)
    index = read_index(directory)
    if index is None:
        return [Difference(rel, "file", "to exist", "missing")]
    package = locked.get(fork.distribution)
    # `deps status` reports pyproject against uv.lock as its own state (lock stale)
    locked_commit = (package.commit if package else None) if compare_lock else fork.rev
    other = package.other_source(fork) if package and compare_lock else None
    diffs = [Difference(rel, "shape", "as `nemo-rl deps patches` writes it", problem) for problem in index.problems]  # guard: records-what-is-out-of-shape-is-drift
    if not index.parsed:
        return diffs
    diffs += _pin_differences(rel, index, fork, locked_commit, other)
    if index.distribution != fork.distribution:
        diffs.append(Difference(rel, "distribution", fork.distribution, index.distribution))
    if index.digest != index.expected_digest():  # guard: offline-index-digest
        diffs.append(Difference(rel, "digest (a fact in the index was edited by hand)", index.expected_digest(),
                                str(index.digest)))
    if require_why and (not index.why.strip() or index.why.strip() == WHY_PLACEHOLDER):  # guard: offline-why-note
        diffs.append(Difference(rel, "why", "a note saying what the fork adds and why", "the placeholder"))
    last = index.commits[-1].commit if index.commits else index.base
    if last != index.pinned:  # guard: offline-the-records-end-at-the-pin
        diffs.append(Difference(rel, "pinned", f"{last} (the last [[commit]], or the base without one)",
                                repr(index.pinned)))
    for position, entry in enumerate(index.commits, start=1):
        diffs += _entry_differences(directory, position, entry)
    listed = {entry.record for entry in index.commits} | {INDEX}
    for path in sorted(directory.iterdir()):
        if path.name not in listed:  # guard: offline-stray-files
            diffs.append(Difference(f"{relative_dir(fork.distribution)}/{path.name}", "file", f"listed in {INDEX}",
                                    "not listed (stray or duplicate)"))
    return diffs + (declared_differences(project, fork) if metadata else [])  # guard: derived-checked-offline


def orphans(project: Project, forks: Sequence[lockfile.Fork]) -> list[Difference]:
    """Records directories and git sources without a fork in pyproject.toml."""
    known = {f.distribution for f in forks}
    root = project.root / "patches"
    sources = project.uv_table.get("sources")
    # any git source (by rev, branch or tag; one table or a list) is a fork, or nothing checks it
    pinned = sorted(dist for dist, source in (sources.items() if isinstance(sources, dict) else ())  # guard: orphans-a-git-source-pinned-by-branch-or
                    if dist not in known and any(isinstance(s, dict) and "git" in s  # guard: orphans-a-git-source-pinned-by-rev
                                                 for s in (source if isinstance(source, list) else [source])))
    return [Difference(f"{relative_dir(d.name)}/", "fork", f"[tool.nemo-rl.forks.{d.name}] in pyproject.toml",
                       "missing")
            for d in sorted(root.iterdir() if root.is_dir() else ()) if d.name not in known] + [  # guard: offline-orphaned-records
        Difference("pyproject.toml", f"[tool.uv.sources] {dist} (a git source)",
                   f"[tool.nemo-rl.forks.{dist}] (a git source is a fork)", "missing") for dist in pinned]


def orphan_fix(orphan: Difference) -> str:
    if orphan.field.startswith("[tool.uv.sources]"):
        dist = orphan.field.split()[1]
        return (f"add [tool.nemo-rl.forks.{dist}] to pyproject.toml, pin a full `rev`, and run "
                f"`nemo-rl deps patches {dist}`; or depend on a released {dist}")
    return f"add the fork's table back to pyproject.toml, or remove {orphan.file}"


def check_online(project: Project, fork: lockfile.Fork) -> list[Difference]:
    """The facts of the index and records that differ from the fork and upstream, notes aside."""
    repo = fork_cache.fetched(fork, fork.rev)
    base, fresh = compute(repo, fork)
    directory = records_dir(project.root, fork.distribution)
    rel = index_name(fork.distribution)
    index = read_index(directory)
    if index is None:
        return [Difference(rel, "file", "to exist", "missing")]
    expected = index_for(fork.distribution, fork.url, fork.branch, fork.rev, fork.upstream_url,
                         fork.upstream_branch, base, "", fresh)
    diffs = [Difference(rel, key, value, index.facts()[key])
             for key, value in expected.facts().items() if index.facts()[key] != value]  # guard: online-index-facts
    if len(index.commits) != len(fresh):
        diffs.append(Difference(rel, "downstream commits", str(len(fresh)), str(len(index.commits))))
    for position, record in enumerate(fresh, start=1):
        entry = index.commits[position - 1] if position <= len(index.commits) else None
        name = entry.record if entry else "-"
        if name != record.filename:
            diffs.append(Difference(rel, f"[[commit]] #{position} record", record.filename, name))
        path = directory / name
        if entry is None or Path(name).name != name or not path.is_file():
            diffs.append(Difference(record.filename, "file", f"record of {record.commit}",
                                    _found(path) if entry else "missing"))
            continue
        found = read_record(path).facts()
        diffs += [Difference(name, key, value, found[key])
                  for key, value in record.facts().items() if found[key] != value]  # guard: online-record-facts
    for entry in index.commits[len(fresh):]:
        diffs.append(Difference(rel, "[[commit]]", "no such entry (not downstream of the base)",
                                f"{entry.commit} {entry.subject}"))
    fork_declares = declares_at(project, repo, fork, fork.rev).as_table()
    recorded = index.declares or {}
    diffs += [Difference(rel, f"declares {key}", repr(fork_declares.get(key)), repr(recorded.get(key)))
              for key in ("commit", "version", "requires-python", "requires-dist")
              if fork_declares.get(key) != recorded.get(key)]  # guard: derived-declares-verified-online
    return diffs

