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


def test_a_live_working_cache_of_the_same_pid_is_left_alone(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs = venvs / f"{bundles.WORK_CACHE_PREFIX}{os.getpid()}"  # another container's build, same PID
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






def test_only_working_caches_we_made_are_counted_or_removed(world, tmp_path, monkeypatch, capsys):
    venvs = tmp_path / "venvs"
    venvs.mkdir(mode=0o700)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("mine")
    (venvs / f"{bundles.WORK_CACHE_PREFIX}link").symlink_to(victim)  # planted: a link to someone's directory
    plain = venvs / f"{bundles.WORK_CACHE_PREFIX}plain"  # a directory with the name, not made by nemo-rl
    (plain / bundles.CACHE).mkdir(parents=True)
    (plain / "notes").write_text("someone's")
    planted = {venvs / f"{bundles.WORK_CACHE_PREFIX}link": "a symbolic link", plain: "no nemo-rl-work-cache file"}
    if os.geteuid() == 0:  # another user's, marker and all (only root can make one here)
        theirs, held_theirs = bundle_trust.new_work_cache(venvs)
        os.close(held_theirs)
        for path in (theirs, theirs / bundle_trust.MARKER):
            os.chown(path, 4242, 4242)
        planted[theirs] = "owned by uid 4242"
    ours, held = bundle_trust.new_work_cache(venvs)
    os.close(held)  # a killed build's
    rows = {row.path: row for row in housekeeping.listing(Project.read(world.project))}
    assert rows[ours].state == "unfinished build"
    for path, why in planted.items():
        assert rows[path].state == "not ours" and why in rows[path].detail, rows[path]
    assert housekeeping.prune(Project.read(world.project)) == [ours]
    assert (victim / "precious").read_text() == "mine" and (plain / "notes").exists()
    assert all(path.exists() or path.is_symlink() for path in planted)


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


def test_an_empty_unmarked_working_cache_is_a_killed_builds(world, tmp_path, monkeypatch):
    import tempfile

    from nemo_rl.workers import bundle_trust

    venvs = tmp_path / "venvs"
    venvs.mkdir(mode=0o700)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    killed = Path(tempfile.mkdtemp(prefix=bundle_trust.WORK_CACHE_PREFIX, dir=venvs))  # SIGKILL before the marker
    assert bundle_trust.why_not_ours(killed) is None
    assert killed in housekeeping.prune(Project.read(world.project)) and not killed.exists()
    (venvs / f"{bundle_trust.WORK_CACHE_PREFIX}planted").mkdir()
    (venvs / f"{bundle_trust.WORK_CACHE_PREFIX}planted" / "x").write_text("x")
    assert bundle_trust.why_not_ours(venvs / f"{bundle_trust.WORK_CACHE_PREFIX}planted")  # not empty: not ours
