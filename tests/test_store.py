"""The store (nemo_rl/store.py): a directory of this user's alone, checked once when opened; each refusal's fix,
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
def test_a_store_others_may_reach_into_is_refused_until_the_fix(tmp_path, monkeypatch, mode):
    venvs = tmp_path / "venvs"
    venvs.mkdir()
    os.chmod(venvs, mode)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    with pytest.raises(NemoRLError, match=f"has mode {mode:04o}: others may reach into it") as refused:
        settings.venv_dir()
    with pytest.raises(NemoRLError, match="others may reach into it"):  # `envs list`, `envs prune`
        settings.venv_dir(create=False)
    _follow(refused.value.remedy or "")
    assert settings.venv_dir() == venvs


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
def test_another_users_store_is_refused_until_the_setting_names_ones_own(tmp_path, monkeypatch):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 4242, 4242)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(theirs))
    with pytest.raises(NemoRLError, match="belongs to uid 4242, not to you") as refused:
        settings.venv_dir()
    assert refused.value.remedy == "point NEMO_RL_VENV_DIR at a directory of your own"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "mine"))
    assert settings.venv_dir() == tmp_path / "mine"


def test_a_store_is_checked_once_per_process(tmp_path):
    path = store.open_store(tmp_path / "once", "NEMO_RL_CACHE_DIR")
    os.chmod(path, 0o755)  # what is inside, and the store itself once open, are trusted
    assert store.open_store(path, "NEMO_RL_CACHE_DIR") == path
