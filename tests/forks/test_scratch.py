"""Scratch trees (forks.scratch): in memory only with room and a known size, the user's TMPDIR first, and what a
killed command left removed while a live command's is kept."""

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
    assert scratch.parent(1000) == memory
    assert scratch.parent(info.f_bavail * info.f_frsize) != memory  # no room for it and the margin
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    monkeypatch.setenv("TMPDIR", str(chosen))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() caches its answer
    assert scratch.parent(1000) == chosen  # the user's setting wins


def test_scratch_left_by_a_killed_command_is_removed_and_a_live_one_kept(memory):
    dead, live, young = (memory / f"{scratch.PREFIX}{name}" for name in ("dead", "live", "young"))
    for path in (dead, live, young):
        path.mkdir()
        (path / "file").write_text("x")
    hour_ago = time.time() - 3600
    for path in (dead, live):
        os.utime(path, (hour_ago, hour_ago))
    holder = locks.hold(live)
    try:
        with scratch.directory(1000) as made:
            assert made.parent == memory and locks.held(made)
            assert not dead.exists() and live.exists() and young.exists()
        assert not made.exists()
    finally:
        os.close(holder)
    assert Path(live / "file").exists()
