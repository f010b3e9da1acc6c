"""Where nemo-rl keeps state (settings): the defaults, and a setting that cannot be used is the user's to fix."""

from __future__ import annotations

import os

import pytest

from nemo_rl import settings
from nemo_rl.errors import NemoRLError


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
    assert "the same path on every node" in caught.value.remedy
