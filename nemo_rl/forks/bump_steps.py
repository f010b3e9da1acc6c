"""The steps of `deps bump` that keep the derived [[tool.uv.dependency-metadata]] entry and the report true, as
functions bump() calls in one line each: what the fork declares at the new commit, the entry written before uv
locks it, and the downstream commits counted by commit."""

from __future__ import annotations

from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.forks import declared, fork_metadata, metadata_check
from nemo_rl.progress import progress
from nemo_rl.project import lockfile


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


def declares_for(project: Path, fork: lockfile.Fork, repo: Path, new_rev: str) -> declared.Declares | None:
    """What the fork declares at the new commit, from its own build backend, for the index and the derived entry
    (None: the fork has no entry to derive). Without the fork's metadata the entry cannot be derived, so the bump
    stops."""
    if not metadata_check.derives(project, fork.distribution):
        return None
    progress("reading the fork's own metadata at the new commit (its build backend)")
    try:
        new = fork_metadata.read(repo, new_rev)
    except NemoRLError as exc:
        raise NemoRLError(f"the fork's own metadata at {new_rev[:12]} could not be read, so its "
                          f"[[tool.uv.dependency-metadata]] entry cannot be derived: {exc.what.splitlines()[0]}",
                          f"fix what stops the fork's build backend, then run `nemo-rl deps bump {fork.distribution} "
                          f"--rev {new_rev}` again\n{exc.remedy or ''}".rstrip()) from exc
    dropped = frozenset(d.name for d in metadata_check.deltas(project, fork.distribution).drop)
    return fork_metadata.declares(new, new_rev, fork.distribution, dropped)  # before anything is locked


def prefetched_trees(project: Path, fork: lockfile.Fork, repo: Path, new_rev: str, old_fetched: bool) -> list[str]:
    """The commits whose trees come with the diffs' blobs (their metadata is built after the history): the old
    pin, when the fork still has it, and the new commit unless its metadata is built first, for the entry."""
    derived = metadata_check.derives(project, fork.distribution)
    return fork_metadata.uncached(repo, [*([fork.rev] if old_fetched else []), *([] if derived else [new_rev])])


EntryChange = tuple[declared.Entry | None, declared.Entry]  # (the entry before, the entry written)


def write_entry(staged: Path, fork: lockfile.Fork, declares: declared.Declares | None
                ) -> tuple[list[str], EntryChange | None]:
    """Write the derived entry into the staged pyproject.toml before uv locks it; (the report's lines, the change
    when the entry changed: uv then locks online, since the requirements it resolves are new)."""
    if declares is None:
        return [], None
    before, written, unneeded = metadata_check.write_derived(staged, fork.distribution, declares)
    after = written or before
    assert after is not None  # unchanged means the entry was there already: write_entry adds a missing one
    lines = [f"  [[tool.uv.dependency-metadata]] {fork.distribution}: the fork's own metadata at the new commit, "
             f"{'rewritten' if written else 'unchanged'} (version {after.version})"]
    lines += [f"    the drop of {name} is unnecessary (the fork no longer declares it): removed from "
              f"[tool.nemo-rl.forks.{fork.distribution}] drop" for name in unneeded]
    if not written:
        return lines, None
    lines[1:1] = metadata_check.entry_changes(before, written)
    return lines, (before, written)


def lock_refused(fork: lockfile.Fork, change: EntryChange, exc: NemoRLError) -> NemoRLError:
    """uv could not lock the entry derived from the fork's metadata: the exact line that drops what it added."""
    return NemoRLError(f"uv cannot lock {fork.distribution} with the metadata the fork declares at the new commit: "
                       f"{exc.what.splitlines()[0]}", metadata_check.refusal_remedy(*change))
