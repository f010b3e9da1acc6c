"""The develop overlay (nemo_rl/project/develop_state.py): the environment imports from the checkout exactly
the packages the pinned wheel ships.

The develop overlay (project/develop_state.py): a checkout or overlay path that would not stay one line
of a .pth file is refused before any .pth is written."""

from __future__ import annotations

import forkworld
import pytest
from fakes import deps, fake_env

from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state


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
    for checkout, shadow in ((tmp_path / NEWLINE_PATH, tmp_path / "shadow"), (tmp_path / "co", tmp_path / "a\rb")):
        with pytest.raises(NemoRLError, match="control character"):
            develop_state.install_overlay(env, "megatron-core", checkout, shadow)
    assert not list(env.rglob("*.pth"))
    develop_state.install_overlay(env, "megatron-core", tmp_path / "plain co", tmp_path / "shadow")
    assert len(list(env.rglob("*.pth"))) == 1
