"""`deps develop --onto`'s refusal of what cannot be rebased onto (deps/develop_onto.py), on a one-commit
repository, and the advice it gives for a rebase under way."""

from __future__ import annotations

import shlex

import pytest
from fakes import _clone, deps, fake_env
from gitfixtures import commit, git, init

from nemo_rl.deps import develop_onto
from nemo_rl.errors import NemoRLError


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
