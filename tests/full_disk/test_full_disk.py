"""A full disk is the user's to fix, never "a bug in nemo-rl": each write that can fail on one says which filesystem
to free and leaves nothing behind (bump's staging copy, develop's overlay and state). The failure is faked at the
exact call (a write that names no file, a copy inside copytree) so it runs anywhere; one test fills a real tmpfs
where mounting one is allowed. Also: output that cannot be written names what the command did."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import fake_env
from gitfixtures import commit

from nemo_rl import interrupt
from nemo_rl.cli import main
from nemo_rl.project import develop_state, state_dir
from nemo_rl.project.model import Project

NO_SPACE = os.strerror(errno.ENOSPC)


@pytest.fixture(autouse=True)
def _no_steps_from_other_tests():
    """interrupt's completed steps live for the process: each command here starts with none."""
    interrupt.reset()
    yield
    interrupt.reset()


class _FullFile:
    """What os.fdopen gives on a full disk: the file opened, and every write fails with ENOSPC and no file name
    (a write to an open file, or the flush at its close, never carries one)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, NO_SPACE)


def full_for(monkeypatch, prefix: str) -> list[str]:
    """Writes through a temporary file whose name starts with `prefix` (write_atomic's `.<name>.`) fail as on a
    full disk; the others go through. Returns the paths that failed."""
    real = os.fdopen
    failed: list[str] = []

    def fdopen(fd, *args, **kwargs):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if os.path.basename(path).startswith(prefix):
            failed.append(path)
            return _FullFile(fd)
        return real(fd, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", fdopen)
    return failed


def symlinks_fail(monkeypatch) -> list[str]:
    """os.symlink on a full disk (a link needs a block once its target is long): its error names the link."""
    failed: list[str] = []

    def symlink(target, link, *args, **kwargs):
        failed.append(str(link))
        raise OSError(errno.ENOSPC, NO_SPACE, str(link))

    monkeypatch.setattr(os, "symlink", symlink)
    return failed


def freed(err: str) -> Path:
    """The directory the message says to free space on."""
    found = re.search(r"free space on the filesystem of (\S+?)(?=[ (\n]|$)", err)
    assert found, err
    return Path(found.group(1))


def no_staging(project: Path) -> list[str]:
    root = project / state_dir.STAGING_ROOT
    return [p.name for p in root.iterdir() if p.name.startswith("staging-")] if root.is_dir() else []


def new_rev(world) -> str:
    return commit(world.forks["megatron-core"].fork, "feat: full", {"megatron/core/full.py": "F = 1\n"})


def test_write_atomic_names_the_file_when_the_disk_is_full(tmp_path, monkeypatch):
    """The write's own OSError names no file, and the CLI names the filesystem from the file: write_atomic adds it,
    removes its temporary file, and the old contents stay."""
    (tmp_path / "state").mkdir()
    path = tmp_path / "state" / "state.json"
    path.write_text("old\n")
    failed = full_for(monkeypatch, ".state.json.")
    with pytest.raises(OSError) as caught:
        state_dir.write_atomic(path, "new\n")
    assert failed and caught.value.errno == errno.ENOSPC and caught.value.filename == str(path), caught.value
    assert path.read_text() == "old\n" and [p.name for p in path.parent.iterdir()] == ["state.json"]


def test_a_bump_whose_staged_write_fills_the_disk_exits_1_naming_the_filesystem(world, monkeypatch, capsys):
    rev = new_rev(world)
    before = world.files()
    failed = full_for(monkeypatch, ".pyproject.toml.")
    code = main(["deps", "bump", "megatron-core", "--rev", rev, "--project", str(world.project)])
    err = capsys.readouterr().err
    assert failed and code == 1 and "bug in nemo-rl" not in err and NO_SPACE in err, err
    where = freed(err)
    assert where == world.project or world.project in where.parents, err
    assert world.files() == before and no_staging(world.project) == []


@pytest.mark.parametrize("failure", [errno.ENOSPC, errno.EACCES])
def test_a_copy_inside_copytree_that_fails_keeps_its_errno(world, monkeypatch, capsys, failure):
    """copytree folds an OSError into the text of a shutil.Error (no errno): staging patches/ on a full disk read as
    a bug. The copy's own error comes through: a full disk says what to free, an unreadable file names it."""
    rev = new_rev(world)
    before = world.files()
    real = shutil.copy2

    def copy2(source, target, **kwargs):
        if "patches" in Path(source).parts:
            raise OSError(failure, os.strerror(failure), str(source))
        return real(source, target, **kwargs)

    monkeypatch.setattr(shutil, "copy2", copy2)
    code = main(["deps", "bump", "megatron-core", "--rev", rev, "--project", str(world.project)])
    err = capsys.readouterr().err
    assert code == 1 and "bug in nemo-rl" not in err, err
    if failure == errno.ENOSPC:
        assert "cannot copy the files this command changes" in err and "nothing was changed" in err, err
        assert world.project in [freed(err), *freed(err).parents], err
    else:
        assert f"cannot use {world.project / 'patches'}" in err and os.strerror(failure) in err, err
    assert world.files() == before and no_staging(world.project) == []


@pytest.mark.parametrize("env_exists, fails", [(True, ".develop.json."), (False, ".develop.json."),
                                               (True, f".{develop_state.OVERLAY_PREFIX}"), (False, "symlink")])
def test_a_develop_that_fills_the_disk_leaves_nothing_behind(world, tmp_path, monkeypatch, capsys, env_exists,
                                                             fails):
    """The shadow directory's links, the overlay's .pth (written when the environment exists) or develop.json
    cannot be written: exit 1 naming the filesystem, and no overlay, shadow directory or state stays (a left
    overlay would make the next develop answer "already developed")."""
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    if env_exists:
        fake_env(env)
    mine = tmp_path / "my megatron"
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(mine)], check=True)
    with pytest.MonkeyPatch.context() as full:
        failed = full_for(full, fails) if fails != "symlink" else symlinks_fail(full)
        code = main(["deps", "develop", "megatron-core", str(mine), "--project", str(world.project)])
    err = capsys.readouterr().err
    assert failed and code == 1 and "bug in nemo-rl" not in err and NO_SPACE in err, err
    assert freed(err).is_dir(), err
    assert not develop_state.shadow_dir(world.project, "megatron-core").exists()
    assert not (world.project / state_dir.STAGING_ROOT / "develop").exists()
    assert develop_state.read(world.project) == {}
    assert not (env_exists and develop_state.has_overlay(env, "megatron-core"))
    assert main(["deps", "develop", "megatron-core", str(mine), "--project", str(world.project)]) == 0, \
        capsys.readouterr().err  # once there is space, the same command works


def test_a_full_disk_error_that_names_no_file_is_still_exit_1(world, monkeypatch, capsys):
    """Any ENOSPC that reaches the CLI is the user's disk: with no file to name, it says so (never "a bug")."""
    def full(project, args):
        raise OSError(errno.ENOSPC, NO_SPACE)

    monkeypatch.setattr("nemo_rl.deps.status.run", full)
    assert main(["deps", "status", "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert f"a write failed: {NO_SPACE}" in err and "free space where the command writes" in err, err


def test_a_bump_whose_output_cannot_be_written_says_what_landed(world):
    """`bump > /dev/full`: the exit is 1 (the output is lost), and the one line says pyproject.toml, uv.lock and
    patches/ landed, so a script that handles the failure does not take the bump for undone."""
    rev = new_rev(world)
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "nemo_rl", "deps", "bump", "megatron-core", "--rev", rev,
                                 "--project", str(world.project)], stdout=full, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **world.git_env()}, timeout=300)
    lines = [line for line in result.stderr.splitlines() if not line.startswith("==>")]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert "cannot write the command's output (stdout)" in lines[0] and "the command itself finished" in lines[0]
    assert re.search(r"pyproject\.toml, uv\.lock, patches/megatron-core landed in ", lines[0]), lines[0]
    assert Project.read(world.project).fork("megatron-core").rev == rev


class _FullStdout:
    """stdout on a full disk as nemo_rl/__main__.py's wrapper reports it."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, NO_SPACE, "the command's output (stdout)")

    def flush(self) -> None:
        pass


def test_a_print_that_fails_after_the_landing_says_what_landed(world, monkeypatch, capsys):
    """Output too long for the buffer fails at the print, inside the command: the error names what had landed."""
    rev = new_rev(world)
    monkeypatch.setattr(sys, "stdout", _FullStdout())
    code = main(["deps", "bump", "megatron-core", "--rev", rev, "--project", str(world.project)])
    err = capsys.readouterr().err
    assert code == 1 and "cannot write the command's output (stdout)" in err, err
    assert "these steps were complete before it: pyproject.toml, uv.lock, patches/megatron-core landed in" in err, err
    assert Project.read(world.project).fork("megatron-core").rev == rev


def _available(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


@pytest.mark.slow
def test_a_bump_on_a_nearly_full_tmpfs_never_exits_3(world, tmp_path):
    """The real thing: a 4 MiB tmpfs filled to leave 0 to 36 KB, one bump each (the levels where staging's copy,
    then its writes, run out of space). Every run exits 0 (landed) or 1 (said what to free, changed nothing)."""
    small = tmp_path / "small"
    small.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(small)], capture_output=True,
                                 text=True)
    except FileNotFoundError:
        pytest.skip("no mount command here")
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not allowed here (root and CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    rev = new_rev(world)
    codes = {}
    try:
        for free_kb in range(0, 40, 4):
            project = small / "project"
            shutil.rmtree(project, ignore_errors=True)
            (small / "fill").unlink(missing_ok=True)
            shutil.copytree(world.project, project, symlinks=True)
            before = {p: p.read_bytes() for p in [project / "pyproject.toml", project / "uv.lock",
                                                 *(project / "patches").rglob("*")] if p.is_file()}
            fd = os.open(small / "fill", os.O_WRONLY | os.O_CREAT)
            try:
                os.posix_fallocate(fd, 0, max(_available(small) - free_kb * 1024, 1))
            finally:
                os.close(fd)
            result = subprocess.run([sys.executable, "-m", "nemo_rl", "deps", "bump", "megatron-core", "--rev", rev,
                                     "--project", str(project)], capture_output=True, text=True,
                                    env={**os.environ, **world.git_env()}, timeout=300)
            (small / "fill").unlink()
            codes[free_kb] = result.returncode
            assert result.returncode in (0, 1), (free_kb, result.stderr)
            if result.returncode == 1:
                assert "free space" in result.stderr and NO_SPACE in result.stderr, (free_kb, result.stderr)
                assert {p: p.read_bytes() for p in before} == before, free_kb
            assert no_staging(project) == [], free_kb
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)
    assert 1 in codes.values(), codes  # some level ran out of space (else the fill proved nothing)


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_output_that_cannot_be_written_is_a_failed_command(world, json_flag):
    """A full disk under stdout: the result is lost, so the exit is not 0, and stderr says so in one line."""
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "nemo_rl", "deps", "status", "--project", str(world.project),
                                 *json_flag], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write the command's output (stdout): No space left on device" in lines[0]
