"""The landing journal (nemo_rl/project/journal.py) as `deps recover` and `deps status` find it: it moves only
project files, never through a link out of the project, and a staging copy is a leftover by its lock, not its PID."""

from __future__ import annotations

import json
import os

import pytest
from fakes import deps

from nemo_rl.project import journal, state_dir


def test_a_landing_journal_moves_only_project_files(world, tmp_path, capsys):
    outside = world.project.parent / "outside.txt"
    outside.write_text("untouched")
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir(parents=True)
    (staging / "../../outside.txt").resolve()  # the hostile target
    (staging / "outside.txt").write_text("overwritten")
    for moves in (["../outside.txt"], ["patches/../../outside.txt"], ["README.md"], "uv.lock"):
        (staging / "LANDING.json").write_text(json.dumps({"moves": moves}))
        assert deps(world, "recover") == 1, moves
        err = capsys.readouterr().err
        assert "names paths a landing never moves" in err and "git status" in err
    assert outside.read_text() == "untouched"
    (staging / "LANDING.json").write_text("{not json")  # a corrupt journal is no dead end
    assert deps(world, "recover") == 1
    assert "cannot read the landing journal" in capsys.readouterr().err


def test_a_landing_journal_never_moves_through_a_link_out_of_the_project(tmp_path):
    """patches/ a link to a directory of the user's: landing patches/megatron-core there would replace theirs."""
    from nemo_rl.errors import NemoRLError

    project, outside = tmp_path / "project", tmp_path / "outside"
    (outside / "megatron-core").mkdir(parents=True)
    (outside / "megatron-core" / "keep.txt").write_text("mine")
    project.mkdir()
    os.symlink(outside, project / "patches")
    staging = project / ".nemo-rl" / "staging-1-x"
    (staging / "patches" / "megatron-core").mkdir(parents=True)
    (staging / "patches" / "megatron-core" / "0001-x.patch").write_text("staged")
    (staging / "LANDING.json").write_text(json.dumps({"moves": ["patches/megatron-core"]}))
    try:
        with pytest.raises(NemoRLError, match="points outside"):
            journal.finish(project, staging)
    finally:
        assert [p.name for p in (outside / "megatron-core").iterdir()] == ["keep.txt"]  # theirs, untouched
    assert (staging / "LANDING.json").exists()  # nothing moved: recover says the same again


def test_a_landing_left_by_a_live_pid_is_recovered(world, capsys):
    """In a container the PID of a killed bump is alive again (often our own): liveness is the lock, not the PID."""
    new_pyproject = (world.project / "pyproject.toml").read_text() + "\n# landed\n"
    staging = world.project / ".nemo-rl" / f"staging-{os.getpid()}-reused"
    staging.mkdir(parents=True)
    (staging / "pyproject.toml").write_text(new_pyproject)
    before = {"pyproject.toml": journal.digest(world.project / "pyproject.toml")}
    (staging / "LANDING.json").write_text(json.dumps({"moves": ["pyproject.toml"], "before": before}))
    assert deps(world, "status", "--json") == 0
    assert {r["state"] for r in json.loads(capsys.readouterr().out)["forks"]} == {"landing interrupted"}
    assert deps(world, "recover") == 0
    assert "finished an interrupted landing" in capsys.readouterr().out
    assert (world.project / "pyproject.toml").read_text() == new_pyproject
    # while a command holds the project lock, its staging is its own, not a leftover
    staging.mkdir(parents=True)
    with state_dir.project_lock(world.project):
        assert journal.leftovers(world.project) == []
    assert journal.leftovers(world.project) == [journal.Leftover(staging, False)]
