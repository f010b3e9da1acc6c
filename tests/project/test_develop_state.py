"""The develop overlay (nemo_rl/project/develop_state.py): it exposes exactly what the pinned wheel ships, refuses a
path that would break a .pth line, and a stop removes only the overlays its own token wrote."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import forkworld
import pytest
from fakes import FLAGS, _cli, deps, fake_env

from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state
from nemo_rl.project.model import Project
from nemo_rl.workers import environments


def test_the_overlay_exposes_exactly_what_the_pin_ships(world, tmp_path, monkeypatch):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    # what the checkout has beyond the wheel (Megatron's training code, its tests and tools)
    (checkout / "megatron/training").mkdir()
    (checkout / "megatron/training/__init__.py").write_text("")
    (checkout / "tools").mkdir()
    (checkout / "tools/__init__.py").write_text("")
    (checkout / "megatron/core/tokens.py").write_text("def tokens():\n    return ['live']\n")
    probe = ("import importlib\nfor m in ('megatron.core.tokens', 'megatron.training', 'tools'):\n"
             "    try:\n        importlib.import_module(m); print(m, 'yes')\n"
             "    except ImportError:\n        print(m, 'no')\n"
             "from megatron.core.tokens import tokens; print(tokens())")
    out = forkworld.uv_run(world, "run", "--quiet", "--extra", "mcore", "python", "-c", probe, env_dir=env)
    assert out.split("\n")[:4] == ["megatron.core.tokens yes", "megatron.training no", "tools no", "['live']"]
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert not (world.project / ".nemo-rl/develop/megatron-core.overlay").exists()



NEWLINE_PATH = "co\nimport os; os.system('touch PWNED')\n"


def test_a_path_with_a_newline_never_reaches_a_pth(tmp_path):
    env = fake_env(tmp_path / "env")
    for checkout, project in ((tmp_path / NEWLINE_PATH, tmp_path), (tmp_path / "co", tmp_path / "a\rb")):
        with pytest.raises(NemoRLError, match="control character"):
            develop_state.install_overlay(env, project, "megatron-core", checkout)
    assert not list(env.rglob("*.pth"))
    develop_state.install_overlay(env, tmp_path, "megatron-core", tmp_path / "plain co")
    assert len(list(env.rglob("*.pth"))) == 1






def test_two_containers_with_one_checkout_path_keep_their_own_overlays(world, tmp_path, monkeypatch):
    """Container A and container B run the same checkout path against a shared NEMO_RL_VENV_DIR; each has its own
    .nemo-rl (its own develop state). B's --stop must leave A's worker environment as A made it."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "driver")))
    assert deps(world, "develop", "megatron-core") == 0
    state_a = develop_state.read(world.project)
    key_a = environments.key_for(Project.read(world.project), FLAGS)

    def worker_env(name: str) -> Path:
        env = fake_env(venvs / name)
        (env / environments.META).write_text(json.dumps({"key": name, "flags": FLAGS, "project": str(world.project),
                                                         "version": 1, "lock_hash": "x"}))
        develop_state.install_overlays(env, world.project, develop_state.read(world.project))  # as a build does
        return env

    env_a = worker_env("a")
    # container B: the same path, its own .nemo-rl (here: develop.json as B's `develop` writes it)
    develop_state.write(world.project, {"megatron-core": dataclasses.replace(state_a["megatron-core"],
                                                                             token=develop_state.new_token())})
    assert environments.key_for(Project.read(world.project), FLAGS) != key_a  # B's workers never reuse A's environment
    env_b = worker_env("b")
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # B stops
    assert develop_state.has_overlay(env_a, "megatron-core"), "B stripped A's overlay"
    assert not develop_state.has_overlay(env_b, "megatron-core")
    assert develop_state.overlay_owner(next(env_a.rglob("*.pth"))) == state_a["megatron-core"].token


def test_stop_without_state_leaves_other_containers_overlays(world, tmp_path, monkeypatch):
    """`rm -rf .nemo-rl` loses the token: the overlays that carry one may be another container's, and are left."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = fake_env(venvs / "w")
    (env / environments.META).write_text(json.dumps({"key": "w", "flags": [], "project": str(world.project),
                                                     "version": 1, "lock_hash": "x"}))
    develop_state.install_overlay(env, tmp_path, "megatron-core", tmp_path / "co", "cd" * 16)
    develop_state.install_overlay(fake_env(tmp_path / "own"), tmp_path, "megatron-core", tmp_path / "co")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(tmp_path / "own"))
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert develop_state.has_overlay(env, "megatron-core")
    assert not develop_state.has_overlay(tmp_path / "own", "megatron-core")


@pytest.mark.parametrize("where", ["worker", "driver"])
def test_a_fifo_overlay_never_hangs_stop(world, tmp_path, where):
    """A FIFO at an overlay's name, in a planted worker environment naming this checkout or in the driver's own."""
    venvs, driver = tmp_path / "venvs", fake_env(tmp_path / "driver")
    env = {"NEMO_RL_VENV_DIR": str(venvs), "UV_PROJECT_ENVIRONMENT": str(driver)}
    assert _cli(world, env, "deps", "develop", "megatron-core")[0] == 0
    planted = driver
    if where == "worker":
        planted = fake_env(venvs / "evil")
        (planted / environments.META).write_text(json.dumps({"version": 1, "key": "evil", "flags": [], "lock_hash": "x",
                                                             "project": str(world.project)}))
    site = next(planted.rglob("site-packages"))
    (site / develop_state.overlay_name("megatron-core")).unlink(missing_ok=True)
    os.mkfifo(site / develop_state.overlay_name("megatron-core"))
    code, out = _cli(world, env, "deps", "status", "--env", str(planted))  # which overlays are live
    assert code in (0, 1) and "Traceback" not in out, out
    code, out = _cli(world, env, "deps", "develop", "--stop", "megatron-core")
    assert code == 0, out


def test_an_overlay_that_cannot_be_removed_is_the_users_to_fix(tmp_path, monkeypatch):
    env = fake_env(tmp_path / "env")
    develop_state.install_overlay(env, tmp_path, "megatron-core", tmp_path / "co")

    def refused(self, missing_ok=False):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "unlink", refused)
    with pytest.raises(NemoRLError, match="cannot remove the overlay"):
        develop_state.remove_overlay(env, "megatron-core")


@pytest.mark.parametrize("token", ["ab\n", "\n"])
def test_a_token_with_a_newline_is_refused(world, tmp_path, monkeypatch, token):
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "env")))
    assert deps(world, "develop", "megatron-core") == 0
    path = world.project / develop_state.STATE
    data = json.loads(path.read_text())
    data["developed"][0]["token"] = token
    path.write_text(json.dumps(data))
    with pytest.raises(NemoRLError, match="token must be hex digits"):
        develop_state.read(world.project)
    with pytest.raises(ValueError, match="not hex"):
        develop_state.install_overlay(fake_env(tmp_path / "w"), tmp_path, "megatron-core", tmp_path, token)


def test_an_overlay_without_a_token_is_nobodys(tmp_path):
    env = fake_env(tmp_path / "env")
    path = develop_state.install_overlay(env, tmp_path, "megatron-core", tmp_path / "co", "ab" * 16)
    assert develop_state.overlay_owner(path) == "ab" * 16
    path.write_text(path.read_text().replace("ab" * 16, ""))
    assert develop_state.overlay_owner(path) is None
    assert not develop_state.remove_overlay(env, "megatron-core", "") and path.exists()
    path.write_text("".join(line for line in path.read_text().splitlines(True) if "owner" not in line))
    assert develop_state.overlay_owner(path) is None


@pytest.mark.parametrize("version", [2, 0, None])
def test_develop_state_of_another_version_is_refused_until_its_printed_fix(tmp_path, version):
    state = tmp_path / ".nemo-rl" / "develop.json"
    state.parent.mkdir()
    entry = {"distribution": "megatron-core", "checkout": str(tmp_path / "mc"), "managed": False, "envs": []}
    state.write_text(json.dumps({"version": version, "developed": [entry]}))
    with pytest.raises(NemoRLError) as refused:
        develop_state.read(tmp_path)
    assert refused.value.what.startswith(f"{state} is develop state of another nemo-rl (version {version!r}")
    command = re.match(r"`([^`]+)`", refused.value.remedy or "")
    assert command, refused.value.remedy
    subprocess.run(["sh", "-c", command.group(1)], check=True)
    assert develop_state.read(tmp_path) == {}


def test_develop_state_of_another_shape_is_refused(tmp_path):
    state = tmp_path / ".nemo-rl" / "develop.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"version": develop_state.STATE_VERSION, "developed": [{"distribution": 1}]}))
    with pytest.raises(NemoRLError, match=f"{state} is not develop state"):
        develop_state.read(tmp_path)
