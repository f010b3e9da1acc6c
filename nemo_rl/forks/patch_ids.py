"""Stable patch-ids of many commits at once, their blobs fetched in one request, cached per commit beside the
fork cache (a commit never changes)."""

from __future__ import annotations

import json
from pathlib import Path

from nemo_rl import values
from nemo_rl.forks import git_diffs, git_history
from nemo_rl.project.state_dir import write_atomic

CACHE = "nemo-rl-patch-ids.json"


def _read(repo: Path) -> dict[str, str]:
    try:
        data = json.loads(values.read_plain_file(repo / CACHE))  # guard: reader-the-patch-id-cache
    except (OSError, ValueError, RecursionError):
        return {}  # a missing or damaged cache only costs a recomputation
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}  # guard: fast-a-damaged-patch-id-cache-is-ignored


def cached(repo: Path, remote: str, shas: list[str]) -> dict[str, str]:
    """sha -> `git patch-id --stable` for each of `shas`, blobs fetched from `remote`.

    Runs without the cache's lock: two writers at once can drop one's new entries, which only costs a
    recomputation."""
    known = _read(repo)
    todo = [sha for sha in dict.fromkeys(shas) if sha not in known]
    if todo:
        git_history.fetch_for_diffs(repo, remote, todo)
        found = git_diffs.patch_ids(repo, todo)
        known = _read(repo) | found
        write_atomic(repo / CACHE, json.dumps(known, sort_keys=True))
    return {sha: known[sha] for sha in shas}


def with_diffstats(repo: Path, shas: list[str]) -> dict[str, git_diffs.Diff]:
    """sha -> its patch-id and diffstat for each of `shas`, whose diffs' blobs are in the cache already; the new
    patch-ids are cached."""
    found = git_diffs.patch_ids_and_diffstats(repo, shas)
    known = _read(repo)
    if any(sha not in known for sha in found):
        known |= {sha: diff.patch_id for sha, diff in found.items()}
        write_atomic(repo / CACHE, json.dumps(known, sort_keys=True))
    return found
