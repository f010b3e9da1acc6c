"""The store (nemo_rl/store.py): a directory of this user's alone, checked when opened and pinned; each refusal's fix,
followed, lets it open."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from nemo_rl import settings, store
from nemo_rl.errors import NemoRLError


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
    monkeypatch.setattr(store, "_pinned", {})  # what the fix, a new process, starts with
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
    path = store.open_store(tmp_path / "once", "NEMO_RL_CACHE_DIR")
    (path / "inside").mkdir(mode=0o777)  # what is inside is trusted
    assert store.open_store(path, "NEMO_RL_CACHE_DIR") == path
