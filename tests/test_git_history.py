"""git_history on a small local repository (no fork cache, no remote): raw diff parsing, per-commit paths,
commit facts and the trial index, which must ignore a git environment inherited from a hook."""

from __future__ import annotations

from gitfixtures import git

from nemo_rl.forks import git_history
from nemo_rl.forks.git_history import ZERO, Change
from nemo_rl.git import git as nemo_git


def test_parse_raw_reads_status_blobs_and_paths_with_odd_characters():
    out = (":100644 100644 " + "1" * 40 + " " + "2" * 40 + " M\0dir/with space.py\0"
           ":000000 100644 " + ZERO + " " + "3" * 40 + " A\0new\nline\0"
           ":100644 000000 " + "4" * 40 + " " + ZERO + " D\0gone.py\0")
    assert git_history._parse_raw(out) == [
        Change("dir/with space.py", "1" * 40, "2" * 40, "M"), Change("new\nline", ZERO, "3" * 40, "A"),
        Change("gone.py", "4" * 40, ZERO, "D")]
    assert git_history._parse_raw("") == []


def test_changes_are_read_from_trees(history):
    repo, (first, second, third), _ = history
    assert sorted((c.path, c.status) for c in git_history.changes(repo, first)) == [("b.txt", "A"), ("pkg/a.py", "A")]
    [change] = git_history.changes(repo, second)
    blob = git(repo, "rev-parse", f"{second}:pkg/a.py")
    assert (change.path, change.status, change.new_blob) == ("pkg/a.py", "M", blob)
    assert [(c.path, c.status, c.new_blob) for c in git_history.changes(repo, third)] == [("b.txt", "D", ZERO)]
    assert git_history.changes_many(repo, [second, third]) == {
        second: git_history.changes(repo, second), third: git_history.changes(repo, third)}


def test_paths_by_commit_and_commit_facts(history):
    repo, (first, second, third), _ = history
    assert git_history.paths_by_commit(repo, f"{first}..main") == {
        second: frozenset({"pkg/a.py"}), third: frozenset({"b.txt"})}
    facts = git_history.commits(repo, [third, first])
    assert list(facts) == [third, first]
    assert facts[first] == ("Fixture Author <author@fixture.invalid>", "2025-05-01T12:00:00+00:00", "add files")


def test_a_complete_repository_misses_no_blob(history):
    repo, shas, _ = history
    assert git_history.missing_blobs(repo, shas) == set()
    git_history.fetch_blobs(repo, "origin", {ZERO})  # nothing to ask for: no request, no remote needed


def test_the_trial_index_applies_in_order_and_names_conflicts(history, tmp_path, monkeypatch):
    repo, (_, _, third), (side, clean) = history
    # inherited from a git hook: each would point git at another repository, index or object store
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.setenv(name, str(tmp_path / "elsewhere"))
    trial = git_history.TrialIndex(repo, third)
    try:
        assert trial.apply(side) == ["pkg/a.py"]  # main changed a.py too: a conflict, the index left as it was
        assert trial.apply(clean) == []
        listed = nemo_git(["ls-tree", "-r", "--name-only", trial.tree], repo=repo).stdout.splitlines()
        assert listed == ["pkg/a.py", "pkg/c.py"]
        assert trial.index.is_file()  # its own index: the repository's is never touched
        assert nemo_git(["status", "--porcelain"], repo=repo).stdout == ""
    finally:
        trial.close()
    assert not trial.index.exists()
