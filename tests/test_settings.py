"""Where nemo-rl keeps state (settings): the defaults, and a setting that cannot be used is the user's to fix; a store
is this user's alone, checked when opened and pinned, and each refusal's fix, followed, lets it open."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from fakes import FLAGS, run_cli

from nemo_rl import settings
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import bundles, housekeeping


def test_the_cache_follows_its_setting_then_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "set"))
    assert settings.cache_dir() == tmp_path / "set" and (tmp_path / "set").is_dir()
    monkeypatch.delenv("NEMO_RL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert settings.cache_dir() == tmp_path / "xdg" / "nemo-rl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert settings.cache_dir() == tmp_path / "home" / ".cache" / "nemo-rl"  # conftest's $HOME


@pytest.mark.parametrize("make, message", [
    (lambda tmp: "relative/cache", "is not an absolute path"),
    (lambda tmp: (tmp / "file").write_text("x") and str(tmp / "file"), "is not a directory"),
])
def test_an_unusable_cache_setting_is_an_error(tmp_path, monkeypatch, make, message):
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", make(tmp_path))
    with pytest.raises(NemoRLError, match=message):
        settings.cache_dir()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only directory")
def test_a_read_only_cache_is_an_error(tmp_path, monkeypatch):
    tmp_path.joinpath("ro").mkdir(mode=0o500)
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "ro"))
    with pytest.raises(NemoRLError, match="is not writable"):
        settings.cache_dir()


def test_worker_environments_follow_their_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    assert settings.venv_dir(create=False) == tmp_path / "venvs" and not (tmp_path / "venvs").exists()
    assert settings.venv_dir() == tmp_path / "venvs" and (tmp_path / "venvs").is_dir()
    monkeypatch.delenv("NEMO_RL_VENV_DIR")
    assert settings.venv_dir(create=False) == settings.CHECKOUT_DIR / "venvs"


def test_an_unusable_venv_setting_names_it(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "file"))
    with pytest.raises(NemoRLError, match=r"NEMO_RL_VENV_DIR .*file cannot be used") as caught:
        settings.venv_dir()
    assert "point NEMO_RL_VENV_DIR at a directory you may write" in caught.value.remedy


@pytest.mark.parametrize("name, read", [("NEMO_RL_VENV_DIR", lambda: settings.venv_dir()),
                                        ("NEMO_RL_VENV_DIR", lambda: settings.venv_dir(create=False)),
                                        ("NEMO_RL_CACHE_DIR", settings.cache_dir)])
@pytest.mark.parametrize("setting", ["rel", "./venvs", "../shared/venvs"])
def test_a_relative_path_setting_is_refused_naming_the_path_it_means(tmp_path, monkeypatch, name, read, setting):
    """Like NEMO_RL_BUNDLE_DIR: a relative path names another directory from every working directory (each Ray
    worker resolves it against its own), so it is refused, with the absolute path it names from here, and
    nothing is made."""
    here = tmp_path / "work" / "here"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    monkeypatch.setenv(name, setting)
    with pytest.raises(NemoRLError, match=f"{name} '{re.escape(setting)}' is not an absolute path") as refused:
        read()
    assert f"{name}={os.path.normpath(here / setting)!r}" in refused.value.remedy
    assert list((tmp_path / "work").rglob("*")) == [here]


def test_a_relative_venv_setting_is_an_error_from_the_cli(tmp_path, monkeypatch, capsys):
    from nemo_rl.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", "rel")
    assert main(["envs", "list", "--project", str(settings.CHECKOUT_DIR)]) == 1
    err = capsys.readouterr().err
    assert "NEMO_RL_VENV_DIR 'rel' is not an absolute path" in err, err
    assert f"NEMO_RL_VENV_DIR={str(tmp_path / 'rel')!r}" in err, err
    monkeypatch.setenv("NEMO_RL_VENV_DIR", "~/venvs")  # ~ is the home directory wherever the command runs
    assert settings.venv_dir(create=False) == Path.home() / "venvs"


@pytest.mark.parametrize("setting", ["", "  "])
def test_an_empty_bundle_dir_is_refused_everywhere_it_is_read(world, tmp_path, monkeypatch, capsys, setting):
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", setting)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    for read in (lambda: bundles.find(Project.read(world.project), FLAGS), bundles.configured,
                 housekeeping._prune_packs,
                 lambda: housekeeping.bundle_rows(Project.read(world.project))):
        with pytest.raises(NemoRLError, match="NEMO_RL_BUNDLE_DIR is set but empty") as refused:
            read()
        assert "unset NEMO_RL_BUNDLE_DIR" in refused.value.remedy
    for verb in ("list", "prune"):
        capsys.readouterr()
        assert main(["envs", verb, "--project", str(world.project)]) == 1
        assert "set but empty" in capsys.readouterr().err


@pytest.mark.parametrize("end, named", [(" ", "a space"), ("\r", "a carriage return"), ("\t", "a tab")])
def test_a_bundle_dir_with_whitespace_is_named(world, tmp_path, monkeypatch, capsys, end, named):
    from nemo_rl.cli import main

    (tmp_path / "bundles").mkdir()
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(tmp_path / "bundles") + end)
    capsys.readouterr()
    assert main(["envs", "list", "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert f"ends with {named}" in err and repr(str(tmp_path / "bundles") + end) in err, err
@pytest.mark.parametrize("setting", ["bundles", "./bundles", "../shared/bundles"])
def test_a_relative_bundle_dir_is_refused_everywhere_it_is_read(world, tmp_path, monkeypatch, capsys, setting):
    """Like NEMO_RL_CACHE_DIR: a relative NEMO_RL_BUNDLE_DIR names another directory from each working directory
    (a worker's is not the driver's), so it is refused with the absolute path it names from here."""
    from nemo_rl.cli import main
    from nemo_rl.errors import NemoRLError
    from nemo_rl.workers import bundles, housekeeping

    (tmp_path / "bundles").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", setting)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    for read in (lambda: bundles.find(Project.read(world.project), ["--locked"]), bundles.configured,
                 housekeeping._prune_packs,
                 lambda: housekeeping.bundle_rows(Project.read(world.project))):
        with pytest.raises(NemoRLError, match="is not an absolute path") as refused:
            read()
        assert f"NEMO_RL_BUNDLE_DIR={os.path.normpath(tmp_path / setting)!r}" in refused.value.remedy
    for verb in ("list", "prune"):
        capsys.readouterr()
        assert main(["envs", verb, "--project", str(world.project)]) == 1
        assert "not an absolute path" in capsys.readouterr().err
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(tmp_path / "bundles"))  # the fix it gives works
    assert main(["envs", "list", "--project", str(world.project)]) == 0


@pytest.mark.parametrize("setting", ["file", "read-only"])
def test_cache_dir_setting_mistakes_exit_1(world, capsys, monkeypatch, tmp_path, setting):
    target = tmp_path / "cache"
    if setting == "file":
        target.write_text("not a directory")
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(target / "sub") if setting == "read-only" else str(target))
    if setting == "read-only":
        target.mkdir()
        monkeypatch.setattr(os, "access", lambda path, mode: False)  # root may write anywhere; the user may not
    code, out = run_cli(capsys, "deps", "patches", "--project", str(world.project))
    assert code == 1 and "NEMO_RL_CACHE_DIR" in out and "bug in nemo-rl" not in out


def _follow(remedy: str) -> None:
    command = re.fullmatch(r".*`([^`]+)`.*", remedy)
    assert command, remedy
    subprocess.run(["sh", "-c", command.group(1)], check=True)


def test_a_store_is_made_private_whatever_the_umask(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "made" / "venvs"))
    old = os.umask(0o002)
    try:
        assert settings.venv_dir() == tmp_path / "made" / "venvs"
    finally:
        os.umask(old)
    assert (tmp_path / "made" / "venvs").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("mode", [0o755, 0o1777, 0o710])
def test_a_store_of_yours_others_may_reach_into_is_made_private_and_said(tmp_path, monkeypatch, capsys, mode):
    venvs = tmp_path / "venvs"
    venvs.mkdir()
    os.chmod(venvs, mode)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    assert settings.venv_dir(create=False) == venvs
    assert venvs.stat().st_mode & 0o7777 == 0o700
    assert capsys.readouterr().err == f"nemo-rl: {venvs} had mode {mode:04o}; made it 0700 (yours alone)\n"
    assert settings.venv_dir() == venvs
    assert capsys.readouterr().err == ""


def test_a_link_in_place_of_a_store_is_refused_until_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "dry-runs").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(NemoRLError, match="dry-runs is a symbolic link") as refused:
        settings.private_dir("dry-runs")
    _follow(refused.value.remedy or "")
    assert settings.private_dir("dry-runs") == tmp_path / "cache" / "dry-runs"
    assert (tmp_path / "elsewhere").is_dir()  # the link's target is left alone


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user needs root (chown)")
@pytest.mark.parametrize("named", [True, False], ids=["named", "a-container-user-without-a-name"])
def test_another_users_store_is_refused_until_it_is_made_yours(tmp_path, monkeypatch, named):
    """A container's user may have no passwd entry: the fix names the uid, and works as well."""
    if not named:
        import getpass

        def nameless() -> str:
            raise KeyError(f"getpwuid(): uid not found: {os.geteuid()}")

        monkeypatch.setattr(getpass, "getuser", nameless)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 4242, 4242)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(theirs))
    with pytest.raises(NemoRLError, match="belongs to uid 4242, not to you") as refused:
        settings.venv_dir()
    assert refused.value.remedy.endswith("or point NEMO_RL_VENV_DIR at a directory of your own")
    command = re.fullmatch(r".*`([^`]+)`.*", refused.value.remedy or "")
    assert command and command.group(1).startswith("sudo " if named else f"sudo chown -R {os.geteuid()} ")
    _follow(f"`{command.group(1).removeprefix('sudo ')}`")  # root here, and no sudo in the test image
    assert settings.venv_dir() == theirs


def test_a_store_replaced_after_it_was_opened_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    assert settings.venv_dir() == tmp_path / "venvs"
    (tmp_path / "venvs").rename(tmp_path / "moved")
    (tmp_path / "venvs").mkdir(mode=0o700)
    with pytest.raises(NemoRLError, match="was replaced by another directory since this process opened it"):
        settings.venv_dir()
    monkeypatch.setattr(settings, "_pinned", {})  # what the fix, a new process, starts with
    assert settings.venv_dir() == tmp_path / "venvs"


def test_a_store_swapped_for_a_link_after_it_was_opened_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    settings.venv_dir()
    (tmp_path / "venvs").rename(tmp_path / "moved")
    (tmp_path / "open").mkdir(mode=0o777)
    (tmp_path / "venvs").symlink_to(tmp_path / "open")
    with pytest.raises(NemoRLError, match="is a symbolic link"):
        settings.venv_dir()


@pytest.mark.parametrize("mode", [0o777, 0o703])
def test_a_store_inside_a_directory_others_may_write_is_refused_until_the_setting_moves(tmp_path, monkeypatch,
                                                                                        mode):
    (tmp_path / "open").mkdir()
    os.chmod(tmp_path / "open", mode)
    (tmp_path / "up").symlink_to(tmp_path / "open")
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "up" / "sub" / "venvs"))
    with pytest.raises(NemoRLError, match=f"is inside {tmp_path / 'open'} \\(mode {mode:04o}\\), where others may"):
        settings.venv_dir()
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "mine" / "venvs"))
    assert settings.venv_dir() == tmp_path / "mine" / "venvs"


@pytest.mark.skipif(os.geteuid() != 0, reason="a link of another user needs root (chown)")
def test_a_store_reached_through_another_users_link_is_refused_until_the_setting_moves(tmp_path, monkeypatch):
    (tmp_path / "mine").mkdir(mode=0o700)
    (tmp_path / "up").symlink_to(tmp_path / "mine")
    os.chown(tmp_path / "up", 4242, 4242, follow_symlinks=False)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "up" / "venvs"))
    with pytest.raises(NemoRLError, match=f"is reached through {tmp_path / 'up'}, a symbolic link of uid 4242"):
        settings.venv_dir()
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "mine" / "venvs"))
    assert settings.venv_dir() == tmp_path / "mine" / "venvs"


def test_a_store_inside_a_sticky_directory_others_may_write_is_opened(tmp_path, monkeypatch):
    (tmp_path / "shared").mkdir()
    os.chmod(tmp_path / "shared", 0o1777)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "shared" / "venvs"))
    assert settings.venv_dir() == tmp_path / "shared" / "venvs"


def test_a_store_once_open_is_not_checked_again_inside(tmp_path):
    path = settings.open_store(tmp_path / "once", "NEMO_RL_CACHE_DIR")
    (path / "inside").mkdir(mode=0o777)  # what is inside is trusted
    assert settings.open_store(path, "NEMO_RL_CACHE_DIR") == path
