"""Patch-ids and diffstats (forks.patch_ids) against git's own answer; their cache reused, rebuilt when damaged."""

from __future__ import annotations

import json
import os

import pytest
from fakes import _never_hangs
from gitfixtures import commit, git

from nemo_rl.forks import patch_ids
from nemo_rl.forks.git_history import ZERO
from nemo_rl.process import run


def ids_of(repo, shas: list[str]) -> dict[str, str]:
    return {sha: diff.patch_id for sha, diff in patch_ids.diffs(repo, shas, stats=False).items()}


def own_answer(repo, sha: str) -> patch_ids.Diff:
    """`git patch-id --stable` of `git show` alone, and the --stat block `git show --stat=100` prints."""
    diff = run(["git", "-C", str(repo), "show", "--first-parent", "-M", sha]).stdout
    found = run(["git", "-C", str(repo), "patch-id", "--stable"], input_text=diff).stdout.split()
    stat = run(["git", "-C", str(repo), "show", "--first-parent", "-M", "--stat=100", "--format=", sha]).stdout
    return patch_ids.Diff(found[0] if found else ZERO, stat.strip("\n"))


def test_patch_ids_and_diffstats_are_gits_per_commit(history):
    repo, shas, side = history
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    empty = git(repo, "rev-parse", "HEAD")
    renamed = commit(repo, "many files", {f"pkg/m{i}.py": f"M = {i}\n" * i for i in range(1, 30)})
    every = [*shas, *side, renamed, empty]
    found = patch_ids.diffs(repo, every)
    assert list(found) == every
    for sha in every:
        assert found[sha] == own_answer(repo, sha), sha
    assert found[empty] == patch_ids.Diff(ZERO, "")
    assert ids_of(repo, every) == {sha: diff.patch_id for sha, diff in found.items()}


def test_the_same_change_on_two_branches_has_one_patch_id(history):
    repo, (first, _, _), _ = history
    git(repo, "checkout", "-q", "-b", "one", first)
    one = commit(repo, "tokens", {"pkg/t.py": "T = [1, 2, 0]\n"})
    git(repo, "checkout", "-q", "-b", "two", first)
    commit(repo, "unrelated", {"other.txt": "x\n"})
    two = commit(repo, "the same tokens, another message", {"pkg/t.py": "T = [1, 2, 0]\n"})
    ids = ids_of(repo, [one, two])
    assert ids[one] == ids[two] and one != two


def test_patch_ids_are_kept_and_reused(history, monkeypatch):
    repo, shas, _ = history
    first = patch_ids.cached(repo, "origin", shas)  # a complete repository: no blob to fetch, no remote asked
    assert first == ids_of(repo, shas)
    assert json.loads((repo / patch_ids.CACHE).read_text())["ids"] == first

    def computing(*_):
        raise AssertionError("recomputed a cached patch-id")

    monkeypatch.setattr(patch_ids, "diffs", computing)
    assert patch_ids.cached(repo, "origin", [shas[1], shas[0], shas[1]]) == {s: first[s] for s in shas[:2]}


@pytest.mark.parametrize("damage", ["not json", '["a list"]', '{"version": 1, "ids": {"%s": 7}}',
                                    '{"version": 0, "ids": {"%s": "0000"}}'])
def test_a_damaged_cache_costs_a_recomputation(history, damage):
    repo, shas, _ = history
    (repo / patch_ids.CACHE).write_text(damage.replace("%s", shas[0]))
    assert patch_ids.cached(repo, "origin", shas) == ids_of(repo, shas)


def test_diffstats_add_their_patch_ids_to_the_cache(history):
    repo, shas, _ = history
    found = patch_ids.with_diffstats(repo, shas)
    assert found == patch_ids.diffs(repo, shas)
    cache = json.loads((repo / patch_ids.CACHE).read_text())
    assert cache["ids"] == {sha: diff.patch_id for sha, diff in found.items()}


def test_a_fifo_patch_id_cache_is_an_empty_cache(tmp_path):
    from nemo_rl.forks import patch_ids

    os.mkfifo(tmp_path / patch_ids.CACHE)
    assert _never_hangs(f"from pathlib import Path; from nemo_rl.forks import patch_ids; "
                        f"print(patch_ids._read(Path({str(tmp_path)!r})))") == "{}"
