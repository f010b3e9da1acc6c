"""The fourth review of issue 24: a landing target that is a mount point, records committed as links, the offline
check over a landing cut short, and a lock-file link planted where the kernel answers EACCES."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess

import pytest
from fakes import FLAGS, deps

from nemo_rl import locks
from nemo_rl.errors import NemoRLError
from nemo_rl.project import journal, landing, lockfile
from nemo_rl.workers import environments


def _can_bind_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None and shutil.which("umount") is not None


@pytest.mark.skipif(not _can_bind_mount(), reason="a bind mount needs root and mount(8)")
def test_a_bind_mounted_uv_lock_is_refused_before_anything_moves(world, tmp_path, capsys):
    """`docker run -v $PWD/uv.lock:/w/uv.lock`: rename(2) onto a mount point fails with EBUSY, after pyproject.toml
    landed. Refused before staging (read from /proc/self/mountinfo), nothing changed, nothing left."""
    lock = world.project / "uv.lock"
    host = tmp_path / "host-uv.lock"
    shutil.copy2(lock, host)
    pyproject = (world.project / "pyproject.toml").read_text()
    if subprocess.run(["mount", "--bind", str(host), str(lock)], capture_output=True).returncode != 0:
        pytest.skip("mount --bind is not allowed here")
    try:
        assert str(lock.resolve()) in landing.mount_points()
        capsys.readouterr()
        assert deps(world, "patches", "megatron-core") == 1
        err = capsys.readouterr().err
        assert f"{lock} is a mount point" in err and "umount" in err, err
        assert (world.project / "pyproject.toml").read_text() == pyproject
        assert not (world.project / ".nemo-rl").exists() or not list((world.project / ".nemo-rl").glob("staging-*"))
    finally:
        subprocess.run(["umount", str(lock)], check=True)
    assert deps(world, "patches", "megatron-core") == 0, capsys.readouterr().err


def test_a_mount_point_among_the_targets_is_refused(world, monkeypatch):
    """Where a bind mount cannot be made: the same refusal from what mountinfo lists."""
    monkeypatch.setattr(landing, "mount_points", lambda: {str(world.project.resolve() / "uv.lock")})
    with pytest.raises(NemoRLError, match="uv.lock is a mount point"):
        landing.Staging(world.project, ["pyproject.toml", "uv.lock"], [])
    landing.Staging(world.project, ["pyproject.toml"], []).discard()  # the other targets are not


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


@pytest.mark.parametrize("kind", ["outside", "loop", "patches", "entry"])
def test_records_committed_as_links_are_refused_before_staging(world, tmp_path, capsys, kind):
    """A pull request makes patches/<dist> a link out of the project (or to `..`, which copying follows into
    itself), or patches/ a link to another project's, or a record a link: the offline check fails, `deps patches`
    and `deps bump` refuse before staging (exit 1, no journal left), and the fix given works."""
    patches = world.project / "patches"
    records = patches / "megatron-core"
    outside = tmp_path / "outside"
    if kind == "patches":
        shutil.copytree(patches, outside)
        shutil.rmtree(patches)
        patches.symlink_to(outside)
        link = patches
    elif kind == "entry":
        index = records / "index.toml"
        shutil.copy2(index, outside)
        index.unlink()
        index.symlink_to(outside)
        link = index
    else:
        shutil.copytree(records, outside)
        shutil.rmtree(records)
        records.symlink_to(outside if kind == "outside" else "..")
        link = records
    rev = lockfile.fork(world.project, "megatron-core").rev
    for command in (["patches", "--check", "--offline"], ["patches", "megatron-core"],
                    ["bump", "megatron-core", "--rev", rev]):
        capsys.readouterr()
        assert deps(world, *command) == 1, command
        err = capsys.readouterr().err
        assert f"{link} is a symbolic link" in err and f"`rm {link}`" in err, (command, err)
        assert not list((world.project / ".nemo-rl").glob("staging-*")) if (world.project / ".nemo-rl").exists() \
            else True
    link.unlink()  # the fix: remove the link, write the records again
    if kind == "patches":
        patches.mkdir()
    assert deps(world, "patches", "megatron-core") == 0, capsys.readouterr().err
    assert records.is_dir() and not records.is_symlink() and (records / "index.toml").is_file()


def test_the_offline_check_over_a_landing_cut_short_names_recover(world, capsys):
    """Killed after the project's records were moved aside and before the new ones moved in: the check says the
    landing was interrupted and names `deps recover` (as status does), never DRIFT with `deps patches`, which
    refuses."""
    records = world.project / "patches" / "megatron-core"
    staging = world.project / ".nemo-rl" / "staging-1-x"
    (staging / "patches").mkdir(parents=True)
    shutil.copytree(records, staging / "patches" / "megatron-core")
    before = {"patches/megatron-core": journal.digest(records)}
    (staging / journal.JOURNAL).write_text(json.dumps({"moves": ["patches/megatron-core"], "before": before}))
    records.rename(staging / ".old-megatron-core")
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    out = capsys.readouterr().out
    assert "megatron-core: landing interrupted" in out and "nemo-rl deps recover" in out, out
    assert "DRIFT" not in out and "run `nemo-rl deps patches megatron-core`" not in out, out
    assert deps(world, "recover") == 0
    assert deps(world, "patches", "--check", "--offline") == 0, capsys.readouterr().out


@pytest.mark.skipif(os.geteuid() != 0, reason="a link owned by another user needs root (lchown)")
def test_a_planted_lock_file_link_is_named_whatever_errno_the_kernel_gives(world, tmp_path, monkeypatch):
    """In a 1777 NEMO_RL_VENV_DIR some kernels refuse O_CREAT|O_NOFOLLOW on a co-user's link with EACCES, not
    ELOOP: the refusal names the link (and its owner where it is that answer), never only the directory."""
    venvs = tmp_path / "shared"
    venvs.mkdir()
    os.chmod(venvs, 0o1777)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    lock = venvs / f".{environments.key_for(world.project, FLAGS)}.lock"
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    lock.symlink_to(victim)
    os.lchown(lock, 54321, 54321)
    with pytest.raises(NemoRLError, match=f"lock file {lock} is a symbolic link"):
        environments.ensure(world.project, FLAGS)
    with pytest.raises(NemoRLError, match="is a symbolic link"):
        locks.open_lock_file(lock)
    assert victim.read_text() == "mine\n" and lock.is_symlink()
