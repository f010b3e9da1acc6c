"""The landing journal's moves (project/journal.py) when a target cannot be replaced: said as what it is, with the
fix, and the staged files kept for `deps recover`."""

from __future__ import annotations

import errno
import json
import os

from fakes import deps

from nemo_rl.project import journal


def test_recover_onto_a_mount_point_exits_1_and_keeps_the_staged_files(world, capsys, monkeypatch):
    """A mount made after the landing staged: EBUSY is said as a mount point, with the fix, never exit 3."""
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir(parents=True)
    (staging / "uv.lock").write_text("# landed\n")
    before = {"uv.lock": journal.digest(world.project / "uv.lock")}
    (staging / journal.JOURNAL).write_text(json.dumps({"moves": ["uv.lock"], "before": before}))
    real = os.replace

    def busy(source, target):
        if str(source).startswith(str(staging)):
            raise OSError(errno.EBUSY, "Device or resource busy")
        real(source, target)

    monkeypatch.setattr(os, "replace", busy)
    capsys.readouterr()
    assert deps(world, "recover") == 1
    err = capsys.readouterr().err
    assert "is a mount point" in err and "the staged files are kept" in err and "umount" in err, err
    assert (staging / "uv.lock").read_text() == "# landed\n"
    monkeypatch.setattr(os, "replace", real)
    assert deps(world, "recover") == 0 and (world.project / "uv.lock").read_text() == "# landed\n"
