"""The steps of `deps bump` that keep the derived [[tool.uv.dependency-metadata]] entry and the report true, as
functions bump() calls in one line each: what the fork declares at the new commit, the entry written and locked
with the pin, and the downstream commits counted by commit."""

from __future__ import annotations

from pathlib import Path

from nemo_rl import uv
from nemo_rl.errors import NemoRLError
from nemo_rl.forks import declared, fork_metadata, metadata_check
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


def declares_for(project: Path, fork: lockfile.Fork, new_rev: str, new: fork_metadata.Metadata | None
                 ) -> declared.Declares | None:
    """What the fork declares at the new commit, for the index and the derived entry (None: the fork has no
    entry to derive). Without the fork's metadata the entry cannot be derived, so the bump stops."""
    if not metadata_check.derives(project, fork.distribution):
        return None
    if new is None:
        raise NemoRLError(f"the fork's own metadata at {new_rev[:12]} could not be read, so its "
                          f"[[tool.uv.dependency-metadata]] entry cannot be derived (see the requirements line above)",
                          f"fix what stops the fork's build backend (its error is above), then run `nemo-rl deps "
                          f"bump {fork.distribution} --rev {new_rev}` again")
    return declared.declares_from(new.version, new.requires_python, new.requires)


def land_entry(staged: Path, fork: lockfile.Fork, declares: declared.Declares | None, lock_mode: str
               ) -> tuple[str, list[str]]:
    """Write the derived entry into the staged pyproject.toml and, when it changed, relock online (the staged lock
    was made with the old entry); (how the lock ran, the report's lines). A requirement uv cannot lock is refused
    with the exact line that drops it."""
    if declares is None:
        return lock_mode, []
    before, written, unneeded = metadata_check.write_derived(staged, fork.distribution, declares)
    after = written or before
    assert after is not None  # unchanged means the entry was there already: write_entry adds a missing one
    lines = [f"  [[tool.uv.dependency-metadata]] {fork.distribution}: the fork's own metadata at the new commit, "
             f"{'rewritten' if written else 'unchanged'} (version {after.version})"]
    lines += [f"    the drop of {name} is unnecessary (the fork no longer declares it): removed from "
              f"[tool.nemo-rl.forks.{fork.distribution}] drop" for name in unneeded]
    if not written:
        return lock_mode, lines
    lines[1:1] = metadata_check.entry_changes(before, written)
    try:
        uv.lock(staged, upgrade_package=fork.distribution)
    except NemoRLError as exc:
        raise NemoRLError(f"uv cannot lock {fork.distribution} with the metadata the fork declares at the new commit: "
                          f"{exc.what.splitlines()[0]}", metadata_check.refusal_remedy(before, written)) from exc
    return "online: the fork's own metadata changed the entry uv locks", lines
