"""The per-repository patch-id cache (forks.patch_ids): computed once, reused, and rebuilt when damaged."""

from __future__ import annotations

import json
import os

import pytest
from fakes import _never_hangs

from nemo_rl.forks import git_diffs, patch_ids


def test_patch_ids_are_kept_and_reused(history, monkeypatch):
    repo, shas, _ = history
    first = patch_ids.cached(repo, "origin", shas)  # a complete repository: no blob to fetch, no remote asked
    assert first == git_diffs.patch_ids(repo, shas)
    assert json.loads((repo / patch_ids.CACHE).read_text())["ids"] == first

    def computing(*_):
        raise AssertionError("recomputed a cached patch-id")

    monkeypatch.setattr(git_diffs, "patch_ids", computing)
    assert patch_ids.cached(repo, "origin", [shas[1], shas[0], shas[1]]) == {s: first[s] for s in shas[:2]}


@pytest.mark.parametrize("damage", ["not json", '["a list"]', '{"version": 1, "ids": {"%s": 7}}',
                                    '{"version": 0, "ids": {"%s": "0000"}}'])
def test_a_damaged_cache_costs_a_recomputation(history, damage):
    repo, shas, _ = history
    (repo / patch_ids.CACHE).write_text(damage.replace("%s", shas[0]))
    assert patch_ids.cached(repo, "origin", shas) == git_diffs.patch_ids(repo, shas)


def test_diffstats_add_their_patch_ids_to_the_cache(history):
    repo, shas, _ = history
    found = patch_ids.with_diffstats(repo, shas)
    assert found == git_diffs.patch_ids_and_diffstats(repo, shas)
    cache = json.loads((repo / patch_ids.CACHE).read_text())
    assert cache["ids"] == {sha: diff.patch_id for sha, diff in found.items()}


def test_a_fifo_patch_id_cache_is_an_empty_cache(tmp_path):
    from nemo_rl.forks import patch_ids

    os.mkfifo(tmp_path / patch_ids.CACHE)
    assert _never_hangs(f"from pathlib import Path; from nemo_rl.forks import patch_ids; "
                        f"print(patch_ids._read(Path({str(tmp_path)!r})))") == "{}"
