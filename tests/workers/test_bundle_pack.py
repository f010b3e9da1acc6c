"""`nemo-rl envs pack` (workers/bundle_pack.py): one pack per destination, killed packs listed and pruned,
a destination it cannot write refused with exit 1."""

import fcntl
import json
import os

from nemo_rl import locks
from nemo_rl.cli import main
from nemo_rl.workers import bundle_pack, bundles


def test_killed_packs_are_listed_and_pruned_and_one_pack_per_destination(world, tmp_path, monkeypatch, capsys):
    root = tmp_path / "bundles"
    killed = root / ".old.packing-123"
    (killed / bundles.CACHE).mkdir(parents=True)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(root))
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    assert main(["envs", "list", "--json", "--project", str(world.project)]) == 0
    rows = json.loads(capsys.readouterr().out)["bundles"]
    assert [(r["path"], r["state"]) for r in rows] == [(str(killed), "unfinished pack")]
    assert main(["envs", "prune", "--project", str(world.project)]) == 0
    assert f"removed {killed}" in capsys.readouterr().out and not killed.exists()
    (killed / bundles.CACHE).mkdir(parents=True)
    assert bundle_pack._remove_dead_packs(root / "another-name") == [killed]  # what a pack to any name does first
    claim = locks.open_lock_file(root / ".b.pack-lock")
    fcntl.flock(claim, fcntl.LOCK_EX)  # a pack into root/b is running
    try:
        assert main(["envs", "pack", "BASE", str(root / "b"), "--project", str(world.project)]) == 1
        assert "another `nemo-rl envs pack` is making" in capsys.readouterr().err
    finally:
        os.close(claim)


def test_pack_into_a_place_it_cannot_write_is_exit_1(world, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["envs", "pack", "BASE", str(blocker / "b"), "--project", str(world.project)]) == 1
    assert f"cannot pack into {blocker}" in capsys.readouterr().err
