"""The landing journal (nemo_rl/project/journal.py): it moves only project files, never through a link, keeps the
staged files when a target cannot be replaced, and a command over a landing cut short names `deps recover`."""

from __future__ import annotations

import errno
import json
import os

import pytest
from fakes import deps

from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project import journal, state_dir
from nemo_rl.project.model import Project


def test_a_landing_journal_moves_only_project_files(world, tmp_path, capsys):
    outside = world.project.parent / "outside.txt"
    outside.write_text("untouched")
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir(parents=True)
    (staging / "../../outside.txt").resolve()  # the hostile target
    (staging / "outside.txt").write_text("overwritten")
    for moves in (["../outside.txt"], ["patches/../../outside.txt"], ["README.md"]):
        record = {"version": 1, "moves": moves, "before": dict.fromkeys(moves)}
        (staging / "LANDING.json").write_text(json.dumps(record))
        assert deps(world, "recover") == 1, moves
        err = capsys.readouterr().err
        assert "names paths a landing never moves" in err and "git status" in err
    assert outside.read_text() == "untouched"
    (staging / "LANDING.json").write_text("{not json")  # a corrupt journal is no dead end
    assert deps(world, "recover") == 1
    assert "cannot read " + str(staging / "LANDING.json") in capsys.readouterr().err


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
    (staging / "LANDING.json").write_text(json.dumps({"version": 1, "moves": ["patches/megatron-core"],
                                                          "before": {"patches/megatron-core": None}}))
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
    (staging / "LANDING.json").write_text(json.dumps({"version": 1, "moves": ["pyproject.toml"], "before": before}))
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
    record = {"version": 1, "moves": moves, "before": dict.fromkeys(moves)}
    (staging / "LANDING.json").write_text(json.dumps(record))
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
    record = {"version": 1, "moves": ["patches/megatron-core"], "before": before}
    (staging / "LANDING.json").write_text(json.dumps(record))
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
    (staging / journal.JOURNAL).write_text(json.dumps({"version": 1, "moves": ["uv.lock"] * 200_000,
                                                             "before": {"uv.lock": None}}))
    with pytest.raises(NemoRLError, match="names paths a landing never moves"):
        journal.read_journal(staging)



def test_recover_onto_a_mount_point_exits_1_and_keeps_the_staged_files(world, capsys, monkeypatch):
    """A mount made after the landing staged: EBUSY is said as a mount point, with the fix, never exit 3."""
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir(parents=True)
    (staging / "uv.lock").write_text("# landed\n")
    before = {"uv.lock": journal.digest(world.project / "uv.lock")}
    (staging / journal.JOURNAL).write_text(json.dumps({"version": 1, "moves": ["uv.lock"], "before": before}))
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




def test_bump_and_patches_refuse_over_a_landing_cut_short(world, capsys):
    """A landing killed after pyproject.toml moved: a bump or `deps patches` run over it would read the half-moved
    pins and land over them (and `deps recover` then refuses the newer files); each names `deps recover`."""
    import json

    from nemo_rl.project import journal, state_dir

    rev = Project.read(world.project).fork("megatron-core").rev
    staging = world.project / state_dir.STAGING_ROOT / "staging-1-a"
    staging.mkdir(parents=True)
    (staging / "uv.lock").write_text((world.project / "uv.lock").read_text())
    (staging / journal.JOURNAL).write_text(json.dumps({"version": 1, "moves": ["pyproject.toml", "uv.lock"], "before": {
        name: journal.digest(world.project / name) for name in ("pyproject.toml", "uv.lock")}}))
    for args in (["patches"], ["bump", "megatron-core", "--rev", rev], ["bump", "megatron-core", "--rev", rev,
                                                                          "--dry-run"]):
        capsys.readouterr()
        assert main(["deps", *args, "--project", str(world.project)]) == 1, args
        captured = capsys.readouterr()
        said = captured.out + captured.err
        assert "was cut short" in said and "nemo-rl deps recover" in said, (args, said)
    assert main(["deps", "recover", "--project", str(world.project)]) == 0
    assert main(["deps", "patches", "--project", str(world.project)]) == 0
