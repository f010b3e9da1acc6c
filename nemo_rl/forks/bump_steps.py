"""The steps of `deps bump` that keep the derived [[tool.uv.dependency-metadata]] entry and the report true: what
the bump reads from the project once, what the fork declares at the new commit, the staged pyproject.toml written
once before uv locks it, and the downstream commits counted by commit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.forks import declared, fork_metadata, metadata_check
from nemo_rl.forks.record_files import Index, read_index
from nemo_rl.progress import progress
from nemo_rl.project import lockfile
from nemo_rl.project.state_dir import write_atomic


def commit_changes(old_entries: list[dict], recs) -> tuple[list, list[dict], dict[str, list[str]]]:
    """(commits added, commits removed, patch-id -> the new commits sharing it): counted by commit, so two
    commits with one patch-id are two; a commit is kept when its SHA, or its patch-id (a rebase), was there."""
    old_shas = {e.get("commit") for e in old_entries}
    old_ids: dict[str | None, int] = {}  # an entry without a patch-id counts under None
    for e in old_entries:
        if e.get("commit") not in {r.commit for r in recs}:
            old_ids[e.get("patch-id")] = old_ids.get(e.get("patch-id"), 0) + 1
    added = []
    for r in recs:
        if r.commit in old_shas:
            continue
        if old_ids.get(r.patch_id, 0) > 0:  # the same change under a new SHA: rebased, not added
            old_ids[r.patch_id] -= 1
            continue
        added.append(r)
    new_shas = {r.commit for r in recs}
    new_ids: dict[str | None, int] = {}
    for r in recs:
        if r.commit not in old_shas:
            new_ids[r.patch_id] = new_ids.get(r.patch_id, 0) + 1
    removed = []
    for e in old_entries:
        if e.get("commit") in new_shas:
            continue
        if new_ids.get(e.get("patch-id"), 0) > 0:
            new_ids[e.get("patch-id")] -= 1
            continue
        removed.append(e)
    by_id: dict[str, list[str]] = {}
    for r in recs:
        by_id.setdefault(r.patch_id, []).append(r.commit)
    shared = {pid: shas for pid, shas in by_id.items() if len(shas) > 1 and pid != "0" * 40}
    return added, removed, shared


@dataclass(frozen=True)
class Before:
    """The project as the bump finds it, read once before anything is staged; every step takes these values."""

    fork: lockfile.Fork
    locked: dict[str, lockfile.LockedPackage]
    lock_text: str | None  # uv.lock as committed (None: the project has none yet)
    entry: declared.Entry | None  # the fork's [[tool.uv.dependency-metadata]] entry
    deltas: declared.Deltas  # the fork table's drop and add lists
    index: Index | None  # patches/<dist>/index.toml

    @property
    def derives(self) -> bool:
        return declared.derives(self.entry, self.deltas)

    @property
    def dropped(self) -> frozenset[str]:
        return frozenset(d.name for d in self.deltas.drop)

    def recorded_at_pin(self) -> declared.Declares | None:
        """What the fork declares at the pin, as index.toml's [declares] records it, when the index is the record of
        the pin (pinned and locked there, its digest intact): the old side of the requirement drift, read instead of
        building the old commit's metadata. None otherwise: that metadata is built."""
        index, fork = self.index, self.fork
        locked = self.locked.get(fork.distribution)
        if (index is None or index.pinned != fork.rev or locked is None or locked.commit != fork.rev
                or index.digest != index.expected_digest()):
            return None
        try:
            return metadata_check.recorded(index, fork.distribution)
        except NemoRLError:
            return None  # a [declares] nemo-rl does not read: the old commit's metadata says it instead


def read_before(project: Path, distribution: str, patch_dir: Path) -> Before:
    lock_path = project / "uv.lock"
    return Before(lockfile.fork(project, distribution), lockfile.locked_packages(project),
                  lock_path.read_text() if lock_path.exists() else None, metadata_check.entry(project, distribution),
                  metadata_check.deltas(project, distribution), read_index(patch_dir))


def declares_for(before: Before, repo: Path, new_rev: str) -> declared.Declares | None:
    """What the fork declares at the new commit, from its own build backend, for the index ([declares], recorded
    for every fork: uv.lock is checked against it offline), the derived entry and the drift. Without the fork's
    metadata neither can be made, so the bump stops."""
    progress("reading the fork's own metadata at the new commit (its build backend)")
    try:
        new = fork_metadata.read(repo, new_rev)
    except NemoRLError as exc:
        dist = before.fork.distribution
        made = ("its [[tool.uv.dependency-metadata]] entry cannot be derived" if before.derives else
                f"what it declares cannot be recorded in patches/{dist}/index.toml [declares]")
        raise NemoRLError(f"the fork's own metadata at {new_rev[:12]} could not be read, so {made}: "
                          f"{exc.what.splitlines()[0]}",
                          f"fix what stops the fork's build backend, then run `nemo-rl deps bump {dist} "
                          f"--rev {new_rev}` again\n{exc.remedy or ''}".rstrip()) from exc
    # before anything is locked; a fork without a derived entry locks its own extras: they are recorded too
    return fork_metadata.declares(new, new_rev, before.fork.distribution, before.dropped, extras=not before.derives)


EntryChange = tuple[declared.Entry | None, declared.Entry]  # (the entry before, the entry written)


def write_pyproject(staged: Path, before: Before, rev: str, branch: str | None, base: str | None,
                    declares: declared.Declares | None) -> tuple[list[str], EntryChange | None]:
    """Write the staged pyproject.toml once, before uv locks it (comments and layout stay): the source's rev, the
    fork table's base (when known; uv never reads it) and branch (when given), and the derived entry; (the
    report's lines, the change when the entry changed: a refusal of uv's then names what the change added)."""
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
    if declares is None or not before.derives:  # uv locks the fork's own metadata: nothing to derive
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


def lock_refused(fork: lockfile.Fork, change: EntryChange, exc: NemoRLError) -> NemoRLError:
    """uv could not lock the entry derived from the fork's metadata: the exact line that drops what it added."""
    return NemoRLError(f"uv cannot lock {fork.distribution} with the metadata the fork declares at the new commit: "
                       f"{exc.what.splitlines()[0]}", metadata_check.refusal_remedy(*change))
