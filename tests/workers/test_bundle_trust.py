"""Which working caches under $NEMO_RL_VENV_DIR are this user's node builds' (workers/bundle_trust.py)."""

import os

from fakes import FLAGS, fake_bundle

from nemo_rl import locks
from nemo_rl.workers import bundles


def test_a_live_working_cache_of_the_same_pid_is_left_alone(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs = venvs / f"{bundles.WORK_CACHE_PREFIX}{os.getpid()}"  # another container's build, same PID
    theirs.mkdir(parents=True)
    (theirs / "in-use").write_text("")
    held = locks.hold(theirs)
    try:
        bundle = fake_bundle(world, tmp_path / "bundle")
        monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: None)
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", bundles.check(bundle, world.project, FLAGS))
        assert (theirs / "in-use").exists()
    finally:
        os.close(held)
