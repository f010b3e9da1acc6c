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


def _mirror_rule(monkeypatch, url: str, mirror) -> None:
    """`url.<mirror>.insteadOf <url>`, as a site with a mirror configures it."""
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", f"url.{mirror}.insteadOf")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", url)


URL = "https://forks.nemo-rl.invalid/megatron.git"


def test_a_failed_reach_shows_gits_own_words_and_the_url_it_tried(tmp_path, monkeypatch):
    import pytest

    from nemo_rl.errors import NemoRLError

    mirror = tmp_path / "nothing-serves-this.git"
    _mirror_rule(monkeypatch, URL, mirror)
    with pytest.raises(NemoRLError) as failed:
        nemo_git.ls_remote(URL, "HEAD")
    assert failed.value.what == (f"cannot reach {URL} (git tried {mirror}): fatal: '{mirror}' does not appear to be "
                                 "a git repository; fatal: Could not read from remote repository.")
    assert f"url.<mirror>.insteadOf {URL}" in (failed.value.remedy or "")


def test_a_failed_fetch_shows_gits_own_words_and_the_url_it_tried(tmp_path, monkeypatch):
    import pytest

    from nemo_rl.errors import NemoRLError

    cache = nemo_git.init_cache(tmp_path / "cache")
    nemo_git.set_remote(cache, "fork", URL)
    mirror = tmp_path / "nothing-serves-this.git"
    _mirror_rule(monkeypatch, URL, mirror)
    with pytest.raises(NemoRLError) as failed:
        nemo_git.fetch(cache, "fork", URL, ["+refs/heads/main:refs/nemo-rl/main"])
    assert failed.value.what.startswith(f"cannot fetch from {URL} (git tried {mirror}): fatal: '{mirror}' does not")


def test_a_url_no_rule_rewrites_is_named_once(tmp_path):
    import pytest

    from nemo_rl.errors import NemoRLError

    absent = str(tmp_path / "absent.git")
    with pytest.raises(NemoRLError) as failed:
        nemo_git.ls_remote(absent, "HEAD")
    assert failed.value.what.startswith(f"cannot reach {absent}: fatal: '{absent}' does not appear")
