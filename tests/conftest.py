"""Shared fixtures. Tests never write to $HOME, never use the user's uv cache and reach no network but PyPI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nemo_rl import extras

# Tests that build fixture repositories, run real uv/git end to end or start Ray: `pytest -m "not slow"` leaves
# them out for a quick inner loop (CI runs everything).
SLOW_FIXTURES = {"world", "ray_world", "cluster", "venv_dir"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if "mcore" in item.keywords:
            probe = extras.probe("megatron")
            if not probe.installed:
                item.add_marker(pytest.mark.skip(reason=f"needs the mcore extra: {probe.reason}"))
        if "gpu" in item.keywords and not _cuda_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)"))


def _cuda_available() -> bool:
    try:
        import torch
    except Exception:
        return False
    return bool(torch.cuda.is_available())


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory) -> Path:
    """One private uv cache for the session: PyPI downloads (hatchling) happen once, never in ~/.cache."""
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch, uv_cache):
    """$HOME, caches and git's global config point into tmp, so a test cannot touch the user's."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "nemo-rl-cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(uv_cache))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("UV_NO_GITHUB_FAST_PATH", "1")
    for name in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "GIT_CONFIG_COUNT", "UV_OFFLINE", "UV_FROZEN", "UV_LOCKED"):
        monkeypatch.delenv(name, raising=False)
    yield home


@pytest.fixture(scope="session")
def world_template(tmp_path_factory, uv_cache):
    """The fixture world built once per test run (repositories, `uv lock`, records); each test gets a copy."""
    import forkworld

    root = tmp_path_factory.mktemp("world-template") / "world"
    w = forkworld.make_world(root)
    env = {"HOME": str(root.parent), "UV_CACHE_DIR": str(uv_cache), "GIT_CONFIG_GLOBAL": os.devnull,
           "UV_NO_GITHUB_FAST_PATH": "1", "NEMO_RL_CACHE_DIR": str(root.parent / "cache"), **w.git_env()}
    with pytest.MonkeyPatch.context() as monkeypatch:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        for name in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "UV_OFFLINE", "UV_FROZEN", "UV_LOCKED"):
            monkeypatch.delenv(name, raising=False)
        forkworld.uv_run(w, "lock", "--quiet")
        forkworld.make_records(w)
    return w


@pytest.fixture
def world(tmp_path, monkeypatch, world_template):
    """Fixture forks and a locked fixture project, reached through insteadOf (see tests/forkworld.py): a private
    copy of the session's template, so a test may change anything in it."""
    import forkworld

    w = forkworld.copy_world(world_template, tmp_path / "world")
    forkworld.apply_env(w, monkeypatch)
    return w
