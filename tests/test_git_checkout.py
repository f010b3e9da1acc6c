"""git on the user's checkouts (nemo_rl/git_checkout.py): a work tree git refuses to read is an error naming the fix,
never an empty answer."""

from __future__ import annotations

import os
import subprocess

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.project import state_dir


@pytest.mark.skipif(os.getuid() != 0, reason="a checkout of another user needs root")
def test_a_checkout_git_will_not_read_is_refused_not_taken_for_untracked(world):
    """A runner's checkout, and a job's container running as root: git answers "dubious ownership" and lists
    nothing: taken for "nothing tracked", a commit's .nemo-rl files would be taken for this machine's state."""
    project = world.project
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=project, check=True)
    (project / state_dir.STAGING_ROOT).mkdir()
    for path in [project, *project.rglob("*")]:
        os.lchown(path, 54321, -1)
    state_dir._UNTRACKED.clear()
    with pytest.raises(NemoRLError, match="git cannot list the files it tracks") as refused:
        state_dir.state_root(project)
    assert f"safe.directory {project}" in (refused.value.remedy or "")


def test_fetching_from_a_url_nothing_serves_shows_gits_own_words(tmp_path):
    from gitfixtures import init

    from nemo_rl import git_checkout

    repo = init(tmp_path / "clone")
    absent = str(tmp_path / "absent.git")
    with pytest.raises(NemoRLError) as failed:
        git_checkout.fetch_url(repo, absent, ["+refs/heads/main:refs/remotes/origin/main"])
    assert failed.value.what.startswith(f"cannot fetch from {absent}: fatal: '{absent}' does not appear to be a git")
    assert "insteadOf" in (failed.value.remedy or "")


def test_a_rebase_stopped_midway_without_a_conflict_names_continue_and_abort_and_abort_works(history, monkeypatch):
    """A pick that cannot be committed (here: signing fails) stops the rebase with no unmerged path: the fix is
    `rebase --continue` once what git said is fixed, or `rebase --abort`, which puts the branch back."""
    import re

    from gitfixtures import commit, git

    from nemo_rl import git_checkout

    repo, main, _ = history
    git(repo, "checkout", "-q", "-b", "topic", main[0])
    head = commit(repo, "topic adds d", {"pkg/d.py": "D = 1\n"})
    count = int(os.environ.get("GIT_CONFIG_COUNT", "0"))
    for offset, (key, value) in enumerate((("commit.gpgSign", "true"), ("gpg.program", "false"))):
        monkeypatch.setenv(f"GIT_CONFIG_KEY_{count + offset}", key)
        monkeypatch.setenv(f"GIT_CONFIG_VALUE_{count + offset}", value)
    monkeypatch.setenv("GIT_CONFIG_COUNT", str(count + 2))
    with pytest.raises(NemoRLError, match="stopped in .* without a conflict") as raised:
        git_checkout.rebase(repo, main[-1])
    assert git_checkout.rebasing(repo)
    fixes = re.findall(r"`([^`]+)`", raised.value.remedy or "")
    assert [f.split()[-1] for f in fixes] == ["--continue", "--abort"], raised.value.remedy
    done = subprocess.run(fixes[1], shell=True, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not git_checkout.rebasing(repo) and git(repo, "rev-parse", "HEAD") == head
