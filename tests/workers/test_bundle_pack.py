"""`nemo-rl envs pack` (workers/bundle_pack.py): one pack per destination, killed packs listed and pruned,
a destination it cannot write refused with exit 1."""

import fcntl
import json
import os
import re

import pytest

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
    assert bundle_pack.remove_dead_packs(root, keep_timed_out=True) == [killed]  # what a pack to any name does first
    claim = locks.open_lock_file(root / ".b.pack-lock")
    fcntl.flock(claim, fcntl.LOCK_EX)  # a pack into root/b is running
    try:
        assert main(["envs", "pack", "BASE", str(root / "b"), "--project", str(world.project)]) == 1
        assert "another `nemo-rl envs pack` is making" in capsys.readouterr().err
    finally:
        os.close(claim)


def test_another_user_s_pack_lock_is_refused_never_written_nor_pruned(world, tmp_path, monkeypatch, capsys):
    """A co-user made the destination's pack lock first in a shared bundle directory (mode 1777)."""
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    root = tmp_path / "bundles"
    root.mkdir()
    lock = bundle_pack.pack_lock(root / "b")
    lock.write_text("pid 1 of theirs\n")
    uid = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: uid + 1)  # the file is now another user's
    assert main(["envs", "pack", "BASE", str(root / "b"), "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert f"lock file {lock} belongs to uid {uid}" in err and bundle_pack.NOT_YOURS in err, err
    assert bundle_pack.remove_free_pack_locks(root) == [] and bundle_pack.remove_dead_packs(root) == []
    assert lock.read_text() == "pid 1 of theirs\n"  # nothing written into it
    monkeypatch.setattr(os, "geteuid", lambda: uid)
    assert bundle_pack.remove_free_pack_locks(root) == [lock]  # the owner's own file is taken


def test_pack_into_a_place_it_cannot_write_is_exit_1(world, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["envs", "pack", "BASE", str(blocker / "b"), "--project", str(world.project)]) == 1
    assert f"cannot pack into {blocker}" in capsys.readouterr().err


def test_an_import_check_past_its_limit_keeps_the_pack_and_the_longer_limit_finishes_from_it(world, tmp_path,
                                                                                             capsys):
    dest = tmp_path / "bundles" / "b"
    args = ["envs", "pack", "MCORE", str(dest), "--project", str(world.project)]
    assert main([*args, "--import-timeout", "0.001"]) == 1
    err = capsys.readouterr().err
    kept = bundle_pack.kept_pack(dest)
    assert "took over 0.001 s" in err and f"kept in {kept}" in err and not dest.exists()
    wheel = next(p for p in (kept / bundles.CACHE).rglob("*") if p.is_file() and "archive-v" in str(p))
    inode, wheel = wheel.stat().st_ino, wheel.relative_to(kept)
    fix = re.search(r"`(--import-timeout [0-9.]+)`", err)
    assert fix is not None, err
    assert main([*args, *fix.group(1).split()]) == 0
    out = capsys.readouterr()
    assert f"starting from the uv cache kept in {kept}" in out.err + out.out
    assert not kept.exists()
    assert (dest / wheel).stat().st_ino == inode  # the kept file itself, not built again


def _kept(tmp_path, inputs: str, mode: int = 0o755):
    dest = tmp_path / "b"
    kept = bundle_pack.kept_pack(dest)
    (kept / bundles.CACHE).mkdir(parents=True)
    (kept / bundle_pack.KEPT_INPUTS).write_text(inputs)
    kept.chmod(mode)
    return dest, kept


def test_a_kept_pack_is_taken_only_for_the_same_inputs_and_when_only_this_user_may_write_it(tmp_path):
    dest, kept = _kept(tmp_path, "same")
    assert bundle_pack._resume(dest, tmp_path / "work", "same")
    assert (tmp_path / "work" / bundles.CACHE).is_dir() and not kept.exists()
    assert not (tmp_path / "work" / bundle_pack.KEPT_INPUTS).exists()
    dest, kept = _kept(tmp_path, "other")
    assert not bundle_pack._resume(dest, tmp_path / "work2", "same")
    assert not kept.exists() and not (tmp_path / "work2").exists()
    dest, kept = _kept(tmp_path, "same", 0o775)
    assert not bundle_pack._resume(dest, tmp_path / "work3", "same")
    assert kept.exists() and not (tmp_path / "work3").exists()


def test_a_kept_pack_outlives_other_packs_and_envs_prune_removes_it(tmp_path):
    _, kept = _kept(tmp_path, "same")
    assert bundle_pack.remove_dead_packs(tmp_path, keep_timed_out=True) == [] and kept.exists()
    assert bundle_pack.remove_dead_packs(tmp_path) == [kept] and not kept.exists()


def test_a_kept_pack_whose_removal_was_cut_short_is_never_resumed(tmp_path, monkeypatch):
    """A prune killed midway leaves part of a kept pack: without its record of inputs, which goes first."""
    dest, kept = _kept(tmp_path, "same")
    (kept / bundles.CACHE / "m1.whl").write_text("wheel")

    class Killed(BaseException):
        pass

    def killed_midway(path, ignore_errors=False):
        (path / bundles.CACHE / "m1.whl").unlink()
        raise Killed

    monkeypatch.setattr(bundle_pack.shutil, "rmtree", killed_midway)
    with pytest.raises(Killed):
        bundle_pack.remove_dead_packs(tmp_path)
    monkeypatch.undo()
    assert kept.is_dir() and not bundle_pack._resume(dest, tmp_path / "work", "same")
    assert not (tmp_path / "work").exists() and not kept.exists()


def test_prune_leaves_a_kept_pack_while_a_pack_into_its_destination_runs(tmp_path):
    dest, kept = _kept(tmp_path, "same")
    claim = locks.lock_file(bundle_pack.pack_lock(dest), None)  # the pack that may be taking it
    assert claim is not None
    try:
        assert bundle_pack.remove_dead_packs(tmp_path) == [] and (kept / bundle_pack.KEPT_INPUTS).exists()
    finally:
        os.close(claim)
    assert bundle_pack.remove_dead_packs(tmp_path) == [kept] and not kept.exists()


def test_a_link_in_a_kept_pack_s_place_is_removed_and_never_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / bundle_pack.KEPT_INPUTS).write_text("same")
    kept = bundle_pack.kept_pack(tmp_path / "b")
    kept.symlink_to(elsewhere)
    bundle_pack.remove_kept(kept)
    assert not os.path.lexists(kept) and (elsewhere / bundle_pack.KEPT_INPUTS).read_text() == "same"
