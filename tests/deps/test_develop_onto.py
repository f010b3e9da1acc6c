"""`deps develop --onto`'s refusal of what cannot be rebased onto (deps/develop_onto.py), on a one-commit repository."""

from __future__ import annotations

import pytest
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
