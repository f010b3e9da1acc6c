"""Landing a staged change from its journal (project/journal.py): a staged link is never landed, a move
across filesystems keeps the staged copy, and a journal naming paths a landing never moves is refused."""

import errno
import json
import os

import pytest
from fakes import deps

from nemo_rl.errors import NemoRLError
from nemo_rl.project import journal


@pytest.mark.parametrize("planted", ["dir-link", "file-link", "link-inside"])
def test_recover_lands_no_staged_link(world, tmp_path, capsys, planted):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("theirs")
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir(parents=True)
    records = world.project / "patches" / "megatron-core"
    before = sorted(p.name for p in records.iterdir())
    if planted == "dir-link":
        (staging / "patches").mkdir()
        (staging / "patches" / "megatron-core").symlink_to(outside)
        moves = ["patches/megatron-core"]
    elif planted == "file-link":
        (staging / "uv.lock").symlink_to(outside / "secret")
        moves = ["uv.lock"]
    else:
        (staging / "patches" / "megatron-core").mkdir(parents=True)
        (staging / "patches" / "megatron-core" / "index.toml").symlink_to(outside / "secret")
        moves = ["patches/megatron-core"]
    (staging / "LANDING.json").write_text(json.dumps({"moves": moves}))
    lock = (world.project / "uv.lock").read_text()
    assert deps(world, "recover") == 1
    assert "is not a file a landing moves" in capsys.readouterr().err
    assert not records.is_symlink() and sorted(p.name for p in records.iterdir()) == before
    assert not (world.project / "uv.lock").is_symlink() and (world.project / "uv.lock").read_text() == lock


def test_a_landing_across_filesystems_is_refused_and_the_staged_copy_kept(world, capsys, monkeypatch):
    """A mount inside the project since the landing was staged: the rename fails with EXDEV, and recover says so and
    keeps the staged copy (a copy across filesystems could itself be cut short half-written)."""
    import shutil

    patches = world.project / "patches"
    staging = world.project / ".nemo-rl" / "staging-1-x"
    (staging / "patches").mkdir(parents=True)
    shutil.copytree(patches / "megatron-core", staging / "patches" / "megatron-core")
    before = {"patches/megatron-core": journal.digest(patches / "megatron-core")}
    (staging / "LANDING.json").write_text(json.dumps({"moves": ["patches/megatron-core"], "before": before}))
    real = os.replace

    def across(source, target):
        if str(source).startswith(str(staging)):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real(source, target)

    monkeypatch.setattr(os, "replace", across)
    capsys.readouterr()
    assert deps(world, "recover") == 1
    assert "on different filesystems (a mount inside the project); the staged files are kept" in capsys.readouterr().err
    assert (staging / "LANDING.json").exists() and (staging / "patches" / "megatron-core" / "index.toml").exists()
    monkeypatch.setattr(os, "replace", real)
    assert deps(world, "recover") == 0 and not staging.exists()  # the mount gone: it lands


def test_a_journal_that_names_a_path_twice_is_refused(tmp_path):
    from nemo_rl.project import journal

    staging = tmp_path / "project" / ".nemo-rl" / "staging-1"
    staging.mkdir(parents=True)
    (staging / journal.JOURNAL).write_text(json.dumps({"moves": ["uv.lock"] * 200_000}))
    with pytest.raises(NemoRLError, match="names paths a landing never moves"):
        journal.read_journal(staging)
