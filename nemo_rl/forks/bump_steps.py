"""The steps of `deps bump`."""

from __future__ import annotations

import tomllib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_rl import uv
from nemo_rl.errors import NemoRLError, command
from nemo_rl.forks import declared, fork_cache, fork_metadata, metadata_check, records
from nemo_rl.forks.git_history import ZERO
from nemo_rl.forks.record_files import Index, Listed, Record, index_name, read_index
from nemo_rl.process import Running
from nemo_rl.progress import progress
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project
from nemo_rl.project.state_dir import write_atomic


@dataclass(frozen=True)
class Before:
    fork: lockfile.Fork
    locked: Mapping[str, lockfile.LockedPackage]
    lock_text: str | None
    entry: declared.Entry | None
    deltas: declared.Deltas
    index: Index | None

    @property
    def derives(self) -> bool:
        return declared.derives(self.entry, self.deltas)

    @property
    def dropped(self) -> frozenset[str]:
        return frozenset(d.name for d in self.deltas.drop)

    def at(self, rev: str, branch: str | None) -> bool:
        """Whether the fork is pinned and locked at `rev` on `branch` (None: the recorded one)."""
        locked = self.locked.get(self.fork.distribution)
        return (rev == self.fork.rev and locked is not None and locked.commit == rev  # guard: bump-nothing-to-do-only-at-the-pinned
                and (branch or self.fork.branch) == self.fork.branch)

    def recorded_at_pin(self) -> declared.Declares | None:
        """index.toml's [declares] when the index is the intact record of the pin, else None."""
        index, fork = self.index, self.fork
        locked = self.locked.get(fork.distribution)
        if (index is None or index.pinned != fork.rev or locked is None or locked.commit != fork.rev  # guard: bump-declares-read-only-when-the-index
                or index.digest != index.expected_digest() or index.problems):
            return None
        try:
            return metadata_check.recorded(index, fork.distribution)
        except NemoRLError:
            return None


def read_before(project: Project, distribution: str) -> Before:
    patch_dir = records.records_dir(project.root, distribution)  # first: a linked patches/ is refused by any name
    fork = project.fork(distribution)
    lock_text = lockfile.decoded(project.lock_bytes, project.lock_path) if project.lock_bytes is not None else None
    return Before(fork, project.packages, lock_text, metadata_check.entry(project, distribution),
                  metadata_check.deltas(project, distribution), read_index(patch_dir))


def declares_for(before: Before, repo: Path, new_rev: str) -> declared.Declares | None:
    progress("reading the fork's own metadata at the new commit (its build backend)")  # guard: no-entry-bump-records-declares-for-every
    try:
        new = fork_metadata.read(repo, new_rev)
    except NemoRLError as exc:
        dist = before.fork.distribution
        made = ("its [[tool.uv.dependency-metadata]] entry cannot be derived" if before.derives else
                f"what it declares cannot be recorded in {index_name(dist)} [declares]")
        raise NemoRLError(f"the fork's own metadata at {new_rev[:12]} could not be read, so {made}: "
                          f"{exc.what.splitlines()[0]}",
                          f"fix what stops the fork's build backend, then run "
                          f"{command('nemo-rl deps bump {dist} --rev {rev}', dist=dist, rev=new_rev)} again"
                          f"\n{exc.remedy or ''}".rstrip()) from exc
    # a fork without a derived entry locks its own extras: they are recorded too
    return fork_metadata.declares(new, new_rev, before.fork.distribution, before.dropped, extras=not before.derives)  # guard: bump-the-fork-s-declarations-are-checked


EntryChange = tuple[declared.Entry | None, declared.Entry]


def write_pyproject(staged: Path, before: Before, rev: str, branch: str | None, base: str | None,
                    declares: declared.Declares | None) -> tuple[list[str], EntryChange | None]:
    """Write the staged pyproject.toml once, before uv locks it."""
    import tomlkit

    dist = before.fork.distribution
    path = staged / "pyproject.toml"
    doc = tomlkit.parse(lockfile.read_text(path))
    doc["tool"]["uv"]["sources"][dist]["rev"] = rev
    table = doc["tool"]["nemo-rl"]["forks"][dist]
    if branch:
        table["branch"] = branch
    if base is not None and table.get("base") != base:
        table["base"] = base
    if declares is None or not before.derives:  # guard: derived-bump-locks-the-entry-it-derived
        write_atomic(path, tomlkit.dumps(doc))
        return [], None
    derived, changed, unneeded = declared.write_derived(doc, dist, declares, before.deltas)
    write_atomic(path, tomlkit.dumps(doc))
    lines = [f"  [[tool.uv.dependency-metadata]] {dist}: the fork's own metadata at the new commit, "
             f"{'rewritten' if changed else 'unchanged'} (version {derived.version})"]
    lines += [f"    the drop of {name} is unnecessary (the fork no longer declares it): removed from "
              f"[tool.nemo-rl.forks.{dist}] drop" for name in unneeded]
    if not changed:
        return lines, None
    lines[1:1] = metadata_check.entry_changes(before.entry, derived)
    return lines, (before.entry, derived)


def lock_result(running: Running, staged: Path, before: Before, new_rev: str, change: EntryChange | None,
                offline: bool) -> str:
    """Collect `uv lock --upgrade-package DIST`, started in the staging copy."""
    dist = before.fork.distribution
    mode = "online"
    if offline:
        assert before.lock_text is not None
        try:
            running.wait()
            why = rejected(before.lock_text, lockfile.read_text(staged / "uv.lock"), dist,
                                        before.fork.rev, new_rev)
        except NemoRLError as exc:
            said = [line.strip() for line in exc.what.splitlines() if line.strip() and line.strip() != "(nothing)"]
            why = f"uv failed offline: {(said[-1] if said else 'no message')[:200]}"
        if why is None:  # guard: bump-offline-lock-kept-only-when-offline
            return "offline"
        mode = f"online: the offline lock was thrown away: {why}"
        write_atomic(staged / "uv.lock", before.lock_text)
        running = uv.lock_started(staged, upgrade_package=dist)
    try:
        with running:
            running.wait()
    except NemoRLError as exc:
        if change is None:  # guard: derived-bump-s-refused-lock-names-the
            raise
        raise NemoRLError(f"uv cannot lock {dist} with the metadata the fork declares at the new commit: "
                          f"{exc.what.splitlines()[0]}", metadata_check.refusal_remedy(*change)) from exc
    return mode


def requirement_drift(before: Before, repo: Path, new_rev: str, new: declared.Declares | None) -> list[str]:
    """The bump report's lines comparing the fork's requirements at the old and new commits."""
    fork = before.fork
    old, built = before.recorded_at_pin(), []  # guard: bump-the-drift-s-old-side-from-the
    try:
        if old is None or new is None:
            progress("reading the fork's own metadata at the old commit (its build backend)")
            fork_cache.fetched(fork, fork.rev)
            built = fork_metadata.read_all(repo, [fork.rev] if new else [fork.rev, new_rev])
        if new is None:
            old_lines, new_lines = (tuple(m.requires.values()) for m in built)
        else:
            old_lines = (old or fork_metadata.declares(built[0], fork.rev, fork.distribution, before.dropped)
                         ).requires_dist
            new_lines = new.requires_dist
    except NemoRLError as problem:
        return [f"  requirements: not compared: {problem.what.splitlines()[0]}",
                f"    ({problem.remedy.splitlines()[0] if problem.remedy else 'see above'}); then "
                f"`nemo-rl deps verify {fork.distribution}`"]
    return fork_metadata.drift(old_lines, new_lines).lines()


def validate(staged: Project, fork: lockfile.Fork, new_rev: str) -> dict[str, lockfile.LockedPackage]:
    locked = staged.packages
    problems = []
    if fork.rev != new_rev:
        problems.append(f"pyproject.toml pins {fork.rev}, not {new_rev}")
    problems += [str(d) for d in records.check_offline(staged, fork, locked, require_why=False)]
    if problems:  # guard: bump-validation-after-writing
        raise NemoRLError("the bumped files do not validate: " + "; ".join(problems),
                          "nothing was changed; report this as a bug in nemo-rl")
    return locked


Doc = dict[str, Any]


def rejected(committed: str, offline: str, distribution: str, old_rev: str, new_rev: str) -> str | None:
    """Why `offline` is not the committed lock with only the fork moved, or None."""
    try:
        old = tomllib.loads(committed.replace(old_rev, new_rev))  # guard: offline-lock-the-committed-lock-s-sha
    except tomllib.TOMLDecodeError as exc:
        return f"the committed uv.lock does not parse ({exc})"
    try:
        new = tomllib.loads(offline)
    except tomllib.TOMLDecodeError as exc:
        return f"uv wrote a uv.lock that does not parse ({exc})"
    for doc, which in ((old, "the committed uv.lock"), (new, "the uv.lock uv wrote")):
        if not _shaped(doc):
            return f"{which} has a [[package]] or [manifest] uv does not write"
    for key in sorted((old.keys() | new.keys()) - {"package", "manifest"}):
        if old.get(key) != new.get(key):  # guard: offline-lock-the-header-compared
            return f"it changed uv.lock's {key!r}"
    if _manifest_rest(old, distribution) != _manifest_rest(new, distribution):  # guard: offline-lock-the-manifest-compared
        return "it changed uv.lock's [manifest] beyond the fork's entry"
    old_fork, old_rest = _packages(old, distribution)
    new_fork, new_rest = _packages(new, distribution)
    committed_by_name: dict[Any, list[Doc]] = {}
    for package in old_rest:
        committed_by_name.setdefault(package.get("name"), []).append(package)
    for package in new_rest:
        if package not in committed_by_name.get(package.get("name"), []):  # guard: offline-lock-no-package-added-or-moved
            return f"it adds or changes {package.get('name')} {package.get('version')}"  # guard: offline-lock-the-reason-names-the
    if len(old_fork) != 1 or len(new_fork) != 1:  # guard: offline-lock-the-fork-locked-once
        return f"it locks {distribution} {len(new_fork)} time(s), the committed lock {len(old_fork)}"
    if new_fork[0].get("source") != old_fork[0].get("source"):  # guard: offline-lock-the-fork-at-the-new-commit
        return f"it locks {distribution} from {new_fork[0].get('source')}, not {old_fork[0].get('source')}"
    return None


def _shaped(doc: Doc) -> bool:
    manifest = doc.get("manifest", {})
    tables = [doc.get("package", []), manifest.get("dependency-metadata", []) if isinstance(manifest, dict) else None]
    return all(isinstance(found, list) and all(isinstance(t, dict) for t in found) for found in tables)


def _manifest_rest(doc: Doc, distribution: str) -> Doc:
    manifest = dict(doc.get("manifest", {}))
    manifest["dependency-metadata"] = [e for e in manifest.get("dependency-metadata", [])
                                       if e.get("name") != distribution]  # guard: offline-lock-the-manifest-s-other
    return manifest


def _packages(doc: Doc, distribution: str) -> tuple[list[Doc], list[Doc]]:
    packages = doc.get("package", [])
    return ([p for p in packages if p.get("name") == distribution],
            [p for p in packages if p.get("name") != distribution])


def commit_changes(old_entries: Sequence[Listed], recs: Sequence[Record]
                   ) -> tuple[list[Record], list[Listed], dict[str, list[str]]]:
    """(commits added, commits removed, patch-id -> the new commits sharing it)."""
    old_shas, new_shas = {e.commit for e in old_entries}, {r.commit for r in recs}
    added = _unmatched(recs, old_shas, Counter(e.patch_id for e in old_entries if e.commit not in new_shas))
    removed = _unmatched(old_entries, new_shas, Counter(r.patch_id for r in recs if r.commit not in old_shas))
    by_id: dict[str, list[str]] = {}
    for r in recs:
        by_id.setdefault(r.patch_id, []).append(r.commit)
    shared = {pid: shas for pid, shas in by_id.items() if len(shas) > 1 and pid != ZERO}  # guard: bump-report-shared-patch-ids
    return added, removed, shared


def _unmatched[T: (Record, Listed)](commits: Sequence[T], other_shas: set[str], other_ids: Counter[str]) -> list[T]:
    left = []
    for c in commits:
        if c.commit in other_shas:  # guard: bump-report-a-commit-already-there-is
            continue
        if other_ids[c.patch_id] > 0:
            other_ids[c.patch_id] -= 1
            continue
        left.append(c)
    return left


def lock_versions(packages: Mapping[str, lockfile.LockedPackage]) -> dict[str, str]:
    return {name: (p.commit or str(p.version)) for name, p in packages.items()}


def lock_changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    common = sorted(old.keys() & new.keys())
    changes = [f"{name}: {old[name]} -> {new[name]}" for name in common if old[name] != new[name]]
    changes += [f"{name}: added ({new[name]})" for name in sorted(new.keys() - old.keys())]
    changes += [f"{name}: removed (was {old[name]})" for name in sorted(old.keys() - new.keys())]
    return changes


def report(fork: lockfile.Fork, new_rev: str, old_index: Index | None, base: str, recs: Sequence[Record],
           changes: list[str], dry_run: bool, lock_mode: str) -> str:
    added, removed, shared = commit_changes(old_index.commits if old_index else (), recs)
    old_base = old_index.base if old_index else fork.base
    moved = f"moved {str(old_base)[:12]} -> {base[:12]}" if old_base != base else f"unchanged {base[:12]}"
    lines = [
        f"bump {fork.distribution}{' (dry run: nothing written)' if dry_run else ''}",
        f"  commit    {fork.rev} -> {new_rev}",
        f"  upstream  base {moved}",
        f"  downstream commits: {len(recs)} ({len(added)} added, {len(removed)} removed)",
    ]
    lines += [f"    + {r.commit[:12]} {r.subject}" for r in added]
    lines += [f"    - {str(e.commit)[:12]} {e.subject}" for e in removed]
    lines += [f"    patch-id {pid[:12]} is shared by {len(shas)} commits: {', '.join(s[:12] for s in shas)}"
              for pid, shas in shared.items()]
    how = (" (locked offline: every other package as committed)" if lock_mode == "offline" else
           f" (locked online: {lock_mode.removeprefix('online: ')})" if lock_mode.startswith("online: ") else "")
    lines.append(f"  uv.lock: {len(changes)} change(s){how}" if changes else f"  uv.lock: no other change{how}")
    lines += [f"    {change}" for change in changes]
    return "\n".join(lines)
