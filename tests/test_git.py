"""git as nemo-rl runs it (nemo_rl/git.py): the repository it is pointed at is the one git reads."""

from __future__ import annotations

from gitfixtures import commit, git

from nemo_rl import git as nemo_git


def test_an_inherited_git_dir_does_not_redirect_git(tmp_path, monkeypatch):
    mine, other = tmp_path / "mine", tmp_path / "other"
    for repo in (mine, other):
        repo.mkdir()
        git(repo, "init", "-q")
    expected = commit(mine, "mine", {"a.txt": "a"})
    commit(other, "other", {"b.txt": "b"})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # as inside a git hook
    assert nemo_git.rev_parse(mine, "HEAD") == expected
