"""`deps recover` (deps/recover.py) on a project directory with what a killed bump leaves: nothing, a staging
copy that never landed, a landing cut short. Files in a temporary directory, no fork."""

from __future__ import annotations

import json

from nemo_rl.deps import recover
from nemo_rl.project import landing


def test_nothing_to_recover(tmp_path, capsys):
    assert recover._recover(tmp_path) == 0
    assert "nothing to recover" in capsys.readouterr().out


def test_a_copy_that_never_landed_is_removed_and_a_cut_short_landing_finished(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("old\n")
    (tmp_path / "uv.lock").write_text("old lock\n")
    root = tmp_path / landing.STAGING_ROOT
    unused = root / "staging-1-a"
    unused.mkdir(parents=True)
    (unused / "pyproject.toml").write_text("never landed\n")
    landing_cut = root / "staging-2-b"
    landing_cut.mkdir()
    (landing_cut / "pyproject.toml").write_text("new\n")  # uv.lock moved before the kill: only this one is left
    (landing_cut / landing.JOURNAL).write_text(json.dumps({"moves": ["uv.lock", "pyproject.toml"]}))
    assert recover._recover(tmp_path) == 0
    out = capsys.readouterr().out
    assert "finished an interrupted landing: uv.lock, pyproject.toml" in out
    assert f"removed {unused}" in out
    assert (tmp_path / "pyproject.toml").read_text() == "new\n"
    assert (tmp_path / "uv.lock").read_text() == "old lock\n"
    assert not root.exists()
