"""Stable patch-ids of many commits at once, cached per repository."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nemo_rl import codec
from nemo_rl.forks import git_diffs, git_history

CACHE, VERSION = "nemo-rl-patch-ids.json", 1


@dataclass(frozen=True)
class PatchIds:
    ids: dict[str, str]


def _read(repo: Path) -> dict[str, str]:
    record = codec.read(repo / CACHE, PatchIds, VERSION)
    return record.ids if record else {}


def cached(repo: Path, remote: str, shas: list[str]) -> dict[str, str]:
    """sha -> `git patch-id --stable`, blobs fetched from `remote`."""
    known = _read(repo)
    todo = [sha for sha in dict.fromkeys(shas) if sha not in known]
    if todo:
        git_history.fetch_for_diffs(repo, remote, todo)
        known = _read(repo) | git_diffs.patch_ids(repo, todo)
        codec.write(repo / CACHE, PatchIds(known), VERSION)
    return {sha: known[sha] for sha in shas}


def with_diffstats(repo: Path, shas: list[str]) -> dict[str, git_diffs.Diff]:
    """sha -> its patch-id and diffstat; the blobs must be fetched."""
    found = git_diffs.patch_ids_and_diffstats(repo, shas)
    known = _read(repo)
    if any(sha not in known for sha in found):
        codec.write(repo / CACHE, PatchIds(known | {sha: diff.patch_id for sha, diff in found.items()}), VERSION)
    return found
