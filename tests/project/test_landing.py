"""Landings (nemo_rl/project/landing.py): the journal names only paths a landing moves, a mount point or a read-only
target is refused before staging, and an edit made meanwhile is never landed over."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from fakes import NARROWED, block, deps, fork_with_extras, offline, patches, run_cli
from gitfixtures import commit

from nemo_rl.errors import NemoRLError
from nemo_rl.project import journal, landing, state_dir


@pytest.fixture
def staging(tmp_path):
    path = tmp_path / "project" / state_dir.STAGING_ROOT / "staging-1-x"
    path.mkdir(parents=True)
    return path


def write_journal(staging, content) -> None:
    content = content if isinstance(content, str) else json.dumps({"version": journal.VERSION, **content})
    (staging / journal.JOURNAL).write_text(content)


def test_a_journal_of_landable_paths_is_read(staging):
    moves = ["pyproject.toml", "uv.lock", "patches/megatron-core"]
    write_journal(staging, {"moves": moves, "before": dict.fromkeys(moves)})
    assert journal.read_journal(staging).moves == ("pyproject.toml", "uv.lock", "patches/megatron-core")
    assert journal.project_of(staging) == staging.parent.parent


@pytest.mark.parametrize("moves", [
    [".git/config"], ["../outside"], ["patches/../../x"], ["patches/megatron-core/extra"], ["patches/"],
    ["/etc/passwd"],
])
def test_a_journal_naming_anything_else_is_refused(staging, moves):
    write_journal(staging, {"moves": moves, "before": dict.fromkeys(moves)})
    with pytest.raises(NemoRLError, match="names paths a landing never moves"):
        journal.read_journal(staging)


@pytest.mark.parametrize("content", [{"moves": [7], "before": {}}, {"moves": "uv.lock", "before": {}},
                                     {"moves": {"a": 1}, "before": {}}, {"moves": ["uv.lock"], "before": []},
                                     {"moves": ["uv.lock"], "before": {"uv.lock": 7}}])
def test_a_journal_of_another_shape_is_refused(staging, content):
    write_journal(staging, content)
    with pytest.raises(NemoRLError, match="is not a landing journal"):
        journal.read_journal(staging)


@pytest.mark.parametrize(("content", "words"), [
    ("{not json", "cannot read .*LANDING.json"), ("", "cannot read .*LANDING.json"),
    ('{"other": []}', r"LANDING.json is a landing journal of another nemo-rl \(no version"),
    ("[]", r"LANDING.json is not a landing journal \(Journal: not an object\)"),
], ids=["not json", "empty", "no version", "a list"])
def test_an_unreadable_journal_is_refused_saying_nothing_more_moved(staging, content, words):
    """Nothing more is moved, and the landing cut short may have moved some files already: `git status` says."""
    write_journal(staging, content)
    with pytest.raises(NemoRLError, match=words) as caught:
        journal.read_journal(staging)
    assert "nothing more was moved, but the landing may have moved some files" in caught.value.remedy


@pytest.mark.parametrize("before", [{"pyproject.toml": None}, {"uv.lock": "x" * 64, "pyproject.toml": None},
                                    {"uv.lock": "0" * 63, "pyproject.toml": None}])
def test_a_journal_whose_digests_are_not_one_per_move_is_refused(staging, before):
    write_journal(staging, {"moves": ["uv.lock", "pyproject.toml"], "before": before})
    with pytest.raises(NemoRLError, match="records digests that are not one per moved path"):
        journal.read_journal(staging)
    valid = {"uv.lock": "0" * 64, "pyproject.toml": None}
    write_journal(staging, {"moves": ["uv.lock", "pyproject.toml"], "before": valid})
    assert journal.read_journal(staging).moves == ("uv.lock", "pyproject.toml")


def test_a_missing_journal_is_refused(staging):
    with pytest.raises(NemoRLError, match="cannot read .*LANDING.json"):
        journal.read_journal(staging)


@pytest.mark.parametrize("edited", ["pyproject.toml", "uv.lock", "patches/megatron-core/index.toml", "new file"])
def test_an_edit_made_while_staged_is_never_landed_over(tmp_path, edited):
    """An editor or `uv add` in another terminal takes no project lock: a landing over its edit would lose it."""
    project = tmp_path / "project"
    (project / "patches/megatron-core").mkdir(parents=True)
    for name in ("pyproject.toml", "uv.lock", "patches/megatron-core/index.toml"):
        (project / name).write_text(f"{name} before\n")
    with landing.Staging(project, ["pyproject.toml", "uv.lock"], ["patches/megatron-core"]) as staged:
        for name in ("pyproject.toml", "uv.lock", "patches/megatron-core/index.toml"):
            (staged.path / name).write_text(f"{name} staged\n")
        other = project / ("patches/megatron-core/other.md" if edited == "new file" else edited)
        other.write_text("the other terminal's edit\n")
        with pytest.raises(NemoRLError, match="changed .* while this command ran.*nothing landed") as raised:
            staged.land()
        assert raised.value.remedy == "run the command again"
    assert other.read_text() == "the other terminal's edit\n"
    assert all("staged" not in p.read_text() for p in project.rglob("*") if p.is_file())
    assert not (project / state_dir.STAGING_ROOT).exists()


def test_an_unchanged_project_lands(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("before\n")
    with landing.Staging(project, ["pyproject.toml", "uv.lock"], ["patches/megatron-core"]) as staged:
        (staged.path / "pyproject.toml").write_text("staged\n")
        staged.land()
    assert (project / "pyproject.toml").read_text() == "staged\n"


def test_a_cut_short_landing_whose_journal_cannot_be_read_is_refused_with_its_own_fix(tmp_path):
    """recover cannot finish a landing whose journal does not read: the refusal says what recover would, never
    to run recover."""
    from nemo_rl.errors import NemoRLError
    from nemo_rl.project import journal, state_dir

    staging = tmp_path / state_dir.STAGING_ROOT / "staging-1-a"
    staging.mkdir(parents=True)
    (staging / journal.JOURNAL).write_text("garbage{")
    try:
        journal.refuse_cut_short(tmp_path, locked=True)
    except NemoRLError as exc:
        assert "journal cannot be read" in exc.what and "deps recover" not in str(exc), exc
    else:
        raise AssertionError("a landing cut short was not refused")


def test_a_journal_that_is_a_dangling_link_is_a_journal_that_cannot_be_read(staging):
    """A journal replaced by a link to nowhere: taken for "no journal", the landing cut short read as a staging
    copy killed before it changed anything, which `deps recover` deletes although files had moved."""
    import os

    os.symlink("/nonexistent/LANDING.json", staging / journal.JOURNAL)
    project = journal.project_of(staging)
    assert journal.leftovers(project, locked=True) == [journal.Leftover(staging, True)]
    (cut,) = journal.cut_short(project, locked=True)
    assert cut.unreadable is not None and "cannot read " + str(staging / journal.JOURNAL) in cut.unreadable


def test_a_killed_dry_run_leaves_nothing_behind_for_long(world, tmp_path, monkeypatch, capsys):
    """A dry run stages in this user's directory under nemo-rl's cache (never the shared temporary directory,
    where another user could put a uv workspace root above it); one killed with SIGKILL is removed by the next."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    dead = landing.dry_run_root() / "nemo-rl-dry-run-killed"
    (dead / "patches").mkdir(parents=True)  # what a SIGKILLed dry run leaves: a copy nobody holds
    long_ago = time.time() - 3600
    os.utime(dead, (long_ago, long_ago))
    live = landing.Staging(world.project, [], [], inside=False)  # a dry run still running holds its copy
    new_head = commit(world.forks["nemo-toolkit"].fork, "feat: y", {"nemo/y.py": "Y = 1\n"})
    assert deps(world, "bump", "nemo-toolkit", "--rev", new_head, "--dry-run") == 0
    assert not dead.exists() and live.path.exists() and live.path.parent == landing.dry_run_root()
    assert not list((tmp_path / "tmp").iterdir()) and oct(landing.dry_run_root().stat().st_mode & 0o777) == "0o700"
    live.__exit__(None, None, None)
    assert not live.path.exists()


def test_a_dry_run_starting_while_another_sweeps_keeps_its_copy(world, monkeypatch):
    """The sweep of killed dry runs removes a copy only under its lock: one that a dry run holds is left, even
    when a probe of it came too early to see the hold."""
    live = landing.Staging(world.project, [], [], inside=False)
    try:
        monkeypatch.setattr(landing.locks, "held", lambda path: False)  # the probe before the live one took it
        landing.remove_dead_dry_runs(landing.dry_run_root())
        assert live.path.exists()
    finally:
        live.__exit__(None, None, None)


def test_an_immutable_file_names_the_right_fix(world, capsys):
    import shutil as sh

    lock = world.project / "uv.lock"
    if not sh.which("chattr") or subprocess.run(["chattr", "+i", str(lock)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available on this filesystem")
    try:
        new_head = commit(world.forks["nemo-toolkit"].fork, "feat: z", {"nemo/z.py": "Z = 1\n"})
        assert deps(world, "bump", "nemo-toolkit", "--rev", new_head) == 1
        err = capsys.readouterr().err
        assert "chattr -i" in err and "chmod u+w" not in err
    finally:
        subprocess.run(["chattr", "-i", str(lock)])
def _other_filesystem(project: Path) -> Path:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK) or os.stat(shm).st_dev == os.stat(project).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the test's temporary directory")
    import tempfile

    return Path(tempfile.mkdtemp(prefix="nemo-rl-exdev-", dir=shm))


def test_nemo_rl_dir_on_another_filesystem_is_refused_before_staging(world, capsys):
    """A landing renames from .nemo-rl into the project and patches/: a directory it writes on another filesystem
    (a link, a mount) is refused before staging; a .nemo-rl link is refused as a link (never followed), with a fix
    that keeps an interrupted bump's journal, which recover then finishes."""
    import shutil

    elsewhere = _other_filesystem(world.project)
    patches = world.project / "patches"
    moved = world.project / "patches.real"
    try:
        patches.rename(moved)
        patches.symlink_to(elsewhere)
        with pytest.raises(NemoRLError, match="on another filesystem"):
            landing.require_renames(world.project)
        with pytest.raises(NemoRLError, match="on another filesystem"):
            landing.Staging(world.project, ["uv.lock"], [])
        assert [p.name for p in elsewhere.iterdir()] == []
        patches.unlink()
        moved.rename(patches)
        # a journal in a .nemo-rl link: refused, and the fix it gives works
        shutil.rmtree(world.project / ".nemo-rl", ignore_errors=True)
        (world.project / ".nemo-rl").symlink_to(elsewhere)
        staging = elsewhere / "staging-1-x"
        staging.mkdir()
        (staging / "uv.lock").write_text("# landed\n")
        before = {"uv.lock": journal.digest(world.project / "uv.lock")}
        (staging / "LANDING.json").write_text(json.dumps({"version": 1, "moves": ["uv.lock"], "before": before}))
        capsys.readouterr()
        assert deps(world, "recover") == 1
        err = capsys.readouterr().err
        assert "is a symbolic link" in err and "cp -a" in err, err
        fix = re.search(r"`(rm [^`]* && cp -a [^`]*)`", err).group(1)
        subprocess.run(fix, shell=True, check=True)
        assert deps(world, "recover") == 0, capsys.readouterr().err
        assert (world.project / "uv.lock").read_text() == "# landed\n"
    finally:
        if moved.exists():
            patches.unlink(missing_ok=True)
            moved.rename(patches)
        shutil.rmtree(elsewhere, ignore_errors=True)
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


def test_a_full_disk_while_staging_leaves_no_staging_copy(world, monkeypatch):
    """The copy fails inside `with Staging(...)`'s __enter__, so __exit__ never runs: __enter__ cleans up itself,
    and the message says what to free, not to check the source's path."""
    real = shutil.copy2

    def full(source, target, **kwargs):
        if Path(source).name == "uv.lock":
            raise OSError(errno.ENOSPC, "No space left on device", str(source))
        return real(source, target, **kwargs)

    monkeypatch.setattr(shutil, "copy2", full)
    staging = landing.Staging(world.project, ["pyproject.toml", "uv.lock"], ["patches"])
    with pytest.raises(NemoRLError, match="No space left on device") as refused:
        with staging:
            pytest.fail("staged on a full disk")
    assert "free space on the filesystem of" in refused.value.remedy and "nothing was changed" in refused.value.what
    assert not staging.path.exists() and not (world.project / state_dir.STAGING_ROOT / staging.path.name).exists()


def test_read_only_checkout_exits_1(world, capsys):
    patches = world.project / "patches" / "megatron-core"
    patches.chmod(0o555)
    try:
        code, out = run_cli(capsys, "deps", "patches", "megatron-core", "--project", str(world.project))
    finally:
        patches.chmod(0o755)
    assert code == 1 and "is not writable" in out and "bug in nemo-rl" not in out
def test_an_edit_in_another_terminal_during_a_relock_is_kept(world, capsys, monkeypatch):
    fork_with_extras(world)
    lock = world.project / "uv.lock"
    text = lock.read_text()
    start, end = block(text)
    lied = text[:start] + text[start:end].replace('{ name = "six" }', NARROWED) + text[end:]
    lock.write_text(lied)
    from nemo_rl.deps import patches as patches_verb

    real = patches_verb.uv.lock
    path = world.project / "pyproject.toml"

    def other_terminal(*args, **kwargs):
        # `uv add` in another terminal while the relock runs: it takes no nemo-rl lock
        path.write_text(path.read_text().replace("dependencies = []", 'dependencies = ["colorama"]', 1))
        return real(*args, **kwargs)

    monkeypatch.setattr(patches_verb.uv, "lock", other_terminal)
    rc, out = patches(world, capsys)
    assert rc == 1 and "pyproject.toml changed" in out and "nothing landed" in out, out
    assert 'dependencies = ["colorama"]' in path.read_text() and lock.read_text() == lied
    monkeypatch.setattr(patches_verb.uv, "lock", real)
    assert offline(world, capsys)[0] == 1  # the lie is still named


@pytest.mark.parametrize("name", ["uv.lock", "pyproject.toml"])
def test_a_linked_project_file_is_named_before_a_bump_starts_and_its_fix_works(world, tmp_path, capsys, name):
    """A bump would land its new file over the link and leave what it points to as it was: it says so before any
    fetch, leaves no landing behind for status or recover to trip on, and runs once the fix is followed."""
    outside = tmp_path / "outside" / name
    outside.parent.mkdir()
    (world.project / name).rename(outside)
    (world.project / name).symlink_to(outside)
    before, new_rev = outside.read_bytes(), world.forks["megatron-core"].downstream[0]
    capsys.readouterr()
    assert deps(world, "bump", "megatron-core", "--rev", new_rev) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {world.project / name} is a symbolic link (to {outside}), which a "
                                   "landing would replace"), captured.err
    assert "fetching" not in captured.err  # before any work
    assert outside.read_bytes() == before and (world.project / name).is_symlink()
    assert not (world.project / state_dir.STAGING_ROOT).exists() or not any(
        (world.project / state_dir.STAGING_ROOT).glob("staging-*"))
    assert deps(world, "status") == 0 and "landing interrupted" not in capsys.readouterr().out
    fix = re.search(r"run `([^`]+)`", captured.err).group(1)
    subprocess.run(fix, shell=True, check=True)
    assert deps(world, "bump", "megatron-core", "--rev", new_rev) == 0, capsys.readouterr().err
    assert not (world.project / name).is_symlink() and outside.read_bytes() == before
