"""The report `deps bump` prints."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from nemo_rl.forks.record_files import Index, Listed, Record
from nemo_rl.project.lockfile import Fork, LockedPackage

ZERO = "0" * 40


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


def lock_versions(packages: Mapping[str, LockedPackage]) -> dict[str, str]:
    return {name: (p.commit or str(p.version)) for name, p in packages.items()}


def lock_changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    common = sorted(old.keys() & new.keys())
    changes = [f"{name}: {old[name]} -> {new[name]}" for name in common if old[name] != new[name]]
    changes += [f"{name}: added ({new[name]})" for name in sorted(new.keys() - old.keys())]
    changes += [f"{name}: removed (was {old[name]})" for name in sorted(old.keys() - new.keys())]
    return changes


def report(fork: Fork, new_rev: str, old_index: Index | None, base: str, recs: Sequence[Record],
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
