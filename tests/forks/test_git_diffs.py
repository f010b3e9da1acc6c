"""Patch-ids and diffstats from one diff per commit (git_diffs), against git's own answer for each commit."""

from __future__ import annotations

from gitfixtures import commit, git

from nemo_rl.forks import git_diffs
from nemo_rl.forks.git_history import ZERO
from nemo_rl.process import run


def own_answer(repo, sha: str) -> git_diffs.Diff:
    """`git patch-id --stable` of `git show` alone, and the --stat block `git show --stat=100` prints."""
    diff = run(["git", "-C", str(repo), "show", "--first-parent", "-M", sha]).stdout
    found = run(["git", "-C", str(repo), "patch-id", "--stable"], input_text=diff).stdout.split()
    stat = run(["git", "-C", str(repo), "show", "--first-parent", "-M", "--stat=100", "--format=", sha]).stdout
    return git_diffs.Diff(found[0] if found else ZERO, stat.strip("\n"))


def test_patch_ids_and_diffstats_are_gits_per_commit(history):
    repo, shas, side = history
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    empty = git(repo, "rev-parse", "HEAD")
    renamed = commit(repo, "many files", {f"pkg/m{i}.py": f"M = {i}\n" * i for i in range(1, 30)})
    every = [*shas, *side, renamed, empty]
    found = git_diffs.patch_ids_and_diffstats(repo, every)
    assert list(found) == every
    for sha in every:
        assert found[sha] == own_answer(repo, sha), sha
    assert found[empty] == git_diffs.Diff(ZERO, "")
    assert git_diffs.patch_ids(repo, every) == {sha: diff.patch_id for sha, diff in found.items()}


def test_the_same_change_on_two_branches_has_one_patch_id(history):
    repo, (first, _, _), _ = history
    git(repo, "checkout", "-q", "-b", "one", first)
    one = commit(repo, "tokens", {"pkg/t.py": "T = [1, 2, 0]\n"})
    git(repo, "checkout", "-q", "-b", "two", first)
    commit(repo, "unrelated", {"other.txt": "x\n"})
    two = commit(repo, "the same tokens, another message", {"pkg/t.py": "T = [1, 2, 0]\n"})
    ids = git_diffs.patch_ids(repo, [one, two])
    assert ids[one] == ids[two] and one != two
