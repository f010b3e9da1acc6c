"""The develop overlay (project/develop_state.py): a checkout or overlay path that would not stay one line
of a .pth file is refused before any .pth is written."""

import pytest
from fakes import fake_env

from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state

NEWLINE_PATH = "co\nimport os; os.system('touch PWNED')\n"


def test_a_path_with_a_newline_never_reaches_a_pth(tmp_path):
    env = fake_env(tmp_path / "env")
    for checkout, shadow in ((tmp_path / NEWLINE_PATH, tmp_path / "shadow"), (tmp_path / "co", tmp_path / "a\rb")):
        with pytest.raises(NemoRLError, match="control character"):
            develop_state.install_overlay(env, "megatron-core", checkout, shadow)
    assert not list(env.rglob("*.pth"))
    develop_state.install_overlay(env, "megatron-core", tmp_path / "plain co", tmp_path / "shadow")
    assert len(list(env.rglob("*.pth"))) == 1
