"""Scratch trees (forks.scratch): in a store of the user's, in memory only with room and a known size, the user's
TMPDIR first, and what a killed command left removed while a live command's is kept."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from nemo_rl import locks
from nemo_rl.forks import scratch


@pytest.fixture
def memory(tmp_path, monkeypatch):
    """A stand-in for /dev/shm, TMPDIR unset (the case where nemo-rl chooses)."""
    path = tmp_path / "shm"
    path.mkdir()
    monkeypatch.setattr(scratch, "MEMORY", path)
    monkeypatch.delenv("TMPDIR", raising=False)
    return path


def test_scratch_goes_to_memory_only_with_room(memory, tmp_path, monkeypatch):
    info = os.statvfs(memory)
    name = f"nemo-rl-{os.geteuid()}"
    assert scratch.parent(1000) == memory / name
    assert (memory / name).stat().st_mode & 0o777 == 0o700
    assert scratch.parent(info.f_bavail * info.f_frsize).parent != memory  # no room for it and the margin
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    monkeypatch.setenv("TMPDIR", str(chosen))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() caches its answer
    assert scratch.parent(1000) == chosen / name  # the user's setting wins


def test_memory_another_user_took_first_falls_back_to_the_temp_directory(memory, tmp_path, monkeypatch):
    taken = memory / f"nemo-rl-{os.geteuid()}"
    taken.symlink_to(tmp_path)  # a co-user's plant: never used
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert scratch.parent(1000) == tmp_path / "tmp" / taken.name


def test_scratch_left_by_a_killed_command_is_removed_and_a_live_one_kept(memory):
    where = scratch.parent(1000)
    dead, live, young = (where / name for name in ("dead", "live", "young"))
    for path in (dead, live, young):
        path.mkdir()
        (path / "file").write_text("x")
    hour_ago = time.time() - 3600
    for path in (dead, live):
        os.utime(path, (hour_ago, hour_ago))
    holder = locks.hold(live)
    try:
        with scratch.directory(1000) as made:
            assert made.parent == where and locks.held(made)
            assert not dead.exists() and live.exists() and young.exists()
        assert not made.exists()
    finally:
        os.close(holder)
    assert Path(live / "file").exists()
