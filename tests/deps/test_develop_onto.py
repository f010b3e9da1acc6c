"""`deps develop --onto`'s refusal of what cannot be rebased onto (deps/develop_onto.py), on a one-commit
repository, and the advice it gives for a rebase under way."""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest
from fakes import _clone, deps, fake_env
from gitfixtures import commit, git, init

from nemo_rl.deps import develop_onto
from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state


def test_a_tree_or_blob_is_refused_and_a_commit_or_an_unknown_sha_is_let_through(tmp_path):
    repo = init(tmp_path / "fork")
    head = commit(repo, "one", {"pkg/a.py": "A = 1\n"})
    tree = git(repo, "rev-parse", f"{head}^{{tree}}")
    blob = git(repo, "rev-parse", f"{head}:pkg/a.py")
    for sha, kind in ((tree, "tree"), (blob, "blob")):
        with pytest.raises(NemoRLError) as refused:
            develop_onto._refuse_non_commit(repo, sha, sha[:12])
        assert refused.value.what == f"--onto {sha[:12]} is a {kind}, not a commit"
        assert "upstream/BRANCH" in refused.value.remedy
    assert develop_onto._refuse_non_commit(repo, head, "main") is None
    assert develop_onto._refuse_non_commit(repo, "b" * 40, "b" * 40) is None  # not here yet: the fetch decides


def test_onto_leaves_a_users_clone_configuration_alone(world, tmp_path, monkeypatch, capsys):
    mine = tmp_path / "my-megatron"
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(mine)], check=True)
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    config = (mine / ".git" / "config").read_text()
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 0, capsys.readouterr().err
    assert (mine / ".git" / "config").read_text() == config
    assert git(mine, "branch", "--show-current").startswith("rebase/megatron-core-onto-")


def test_onto_a_tree_or_blob_makes_no_branch(world, capsys):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    branches, head = git(checkout, "branch", "--list"), git(checkout, "rev-parse", "HEAD")
    tree = git(checkout, "rev-parse", "HEAD^{tree}")
    blob = git(checkout, "rev-parse", "HEAD:pyproject.toml")
    for sha, kind in ((tree, "tree"), (blob, "blob")):
        capsys.readouterr()
        assert deps(world, "develop", "megatron-core", "--onto", sha) == 1
        assert f"is a {kind}, not a commit" in capsys.readouterr().err
        assert git(checkout, "branch", "--list") == branches and git(checkout, "rev-parse", "HEAD") == head
def test_the_stash_advice_of_onto_works_when_followed(world, monkeypatch, capsys):
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    (checkout / "megatron/core/feature.py").write_text("FEATURE = 2  # unsaved\n")
    (checkout / "notes.txt").write_text("untracked\n")
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    advice = re.findall(r"`(git -C [^`]+)`", err)
    assert len(advice) == 2 and "stash push" in advice[0] and "stash pop" in advice[1], err
    subprocess.run(shlex.split(advice[0]), check=True, capture_output=True)  # as the user would type it
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 0, capsys.readouterr().err
    subprocess.run(shlex.split(advice[1]), check=True, capture_output=True)
    assert (checkout / "megatron/core/feature.py").read_text() == "FEATURE = 2  # unsaved\n"
    assert (checkout / "notes.txt").read_text() == "untracked\n"
    assert git(checkout, "branch", "--show-current").startswith("rebase/megatron-core-onto-")


def test_onto_during_a_merge_says_to_finish_it(world, monkeypatch, capsys):
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = develop_state.read(world.project)["megatron-core"].checkout

    def git(*args):
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True)

    conflicted = checkout / "megatron/core/conflict.py"
    git("switch", "-q", "-c", "other")
    conflicted.write_text("A\n")
    git("add", ".")
    git("commit", "-qm", "a")
    git("switch", "-q", "-")
    conflicted.write_text("B\n")
    git("add", ".")
    git("commit", "-qm", "b")
    assert git("merge", "other").returncode != 0  # stopped at the conflict
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    assert "a merge is under way" in err and f"git -C {checkout} merge --abort" in err and "stash" not in err, err
def test_onto_advice_names_a_path_with_spaces_as_one_word(world, tmp_path, monkeypatch, capsys):
    """The advice is pasted into a shell: `git -C /tmp/my clone ü rebase --abort` would be three words."""
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = _clone(world, tmp_path / "my clone ü")
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    (mine / ".git" / "rebase-merge").mkdir()  # a rebase under way
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "main") == 1
    err = capsys.readouterr().err
    assert f"git -C {shlex.quote(str(mine))} rebase --abort" in err, err
    assert f"`git -C {mine} rebase" not in err


def test_onto_without_a_committer_identity_changes_nothing_and_its_fix_works(world, monkeypatch, capsys):
    """No identity (none set, and git told not to guess one from the host name): the rebase would stop after its
    branch was made. It is checked first, the checkout stays as it was, and the two commands printed set one."""
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(key, raising=False)
    count = int(os.environ.get("GIT_CONFIG_COUNT", "0"))
    monkeypatch.setenv(f"GIT_CONFIG_KEY_{count}", "user.useConfigOnly")
    monkeypatch.setenv(f"GIT_CONFIG_VALUE_{count}", "true")
    monkeypatch.setenv("GIT_CONFIG_COUNT", str(count + 1))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = develop_state.read(world.project)["megatron-core"].checkout
    branches, head = git(checkout, "branch", "--list"), git(checkout, "rev-parse", "HEAD")
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    assert f"error: git cannot name a committer for the rebased commits in {checkout}: " in err, err
    assert git(checkout, "branch", "--list") == branches and git(checkout, "rev-parse", "HEAD") == head
    assert not develop_onto.git_checkout.rebasing(checkout)
    advice = re.findall(r"`(git -C [^`]+)`", err)
    assert [shlex.split(a)[3:5] for a in advice] == [["config", "user.name"], ["config", "user.email"]], err
    for command in advice:
        subprocess.run(shlex.split(command), check=True)
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 0, capsys.readouterr().err
    assert git(checkout, "branch", "--show-current").startswith("rebase/megatron-core-onto-")
