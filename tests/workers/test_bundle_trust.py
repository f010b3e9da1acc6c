"""What a node trusts (nemo_rl/workers/bundle_trust.py): the digests a site pins, and the working caches that are
this user's node builds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes import FLAGS, fake_bundle

from nemo_rl import locks
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_trust, bundles, housekeeping


def test_a_live_node_copy_of_the_same_pid_is_left_alone(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs = venvs / f"{bundle_trust.NODE_COPY_PREFIX}{os.getpid()}"  # another container's build, same PID
    venvs.mkdir(mode=0o700)
    theirs.mkdir()
    (theirs / "in-use").write_text("")
    held = locks.hold(theirs)
    try:
        bundle = fake_bundle(world, tmp_path / "bundle")
        monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: None)
        project = Project.read(world.project)
        bundles.sync_from(bundle, project, FLAGS, tmp_path / "env", bundles.check(bundle, project, FLAGS))
        assert (theirs / "in-use").exists()
    finally:
        os.close(held)


def test_an_empty_digest_is_refused_never_taken_for_no_pin(world, tmp_path, monkeypatch, capsys):
    """`--digest "$DIGEST"` or NEMO_RL_BUNDLE_DIGESTS=$DIGESTS with the variable unset: the site believes it pins."""
    bundle = fake_bundle(world, tmp_path / "bundles" / "b")
    capsys.readouterr()
    assert main(["envs", "build", "BASE", "--from", str(bundle), "--digest", "", "--project", str(world.project)]) == 1
    assert "is not a bundle digest" in capsys.readouterr().err
    with pytest.raises(NemoRLError, match="is not a bundle digest"):
        bundles.check(bundle, Project.read(world.project), FLAGS, "")
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundle.parent))
    for setting in ("", " , ;"):
        monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", setting)
        with pytest.raises(NemoRLError, match="NEMO_RL_BUNDLE_DIGESTS is set but holds no digest"):
            bundles.find(Project.read(world.project), FLAGS)
    monkeypatch.delenv("NEMO_RL_BUNDLE_DIGESTS")
    assert bundles.find(Project.read(world.project), FLAGS) == bundle


def test_an_empty_unmarked_node_copy_is_a_killed_builds(world, tmp_path, monkeypatch):
    import tempfile


    venvs = tmp_path / "venvs"
    venvs.mkdir(mode=0o700)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    killed = Path(tempfile.mkdtemp(prefix=bundle_trust.NODE_COPY_PREFIX, dir=venvs))  # SIGKILL before the marker
    assert killed in housekeeping.prune(Project.read(world.project)) and not killed.exists()
