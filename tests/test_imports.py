"""Imports proven with another environment's interpreter (nemo_rl/imports.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nemo_rl import imports

# transformer_engine 2.3's `common` runs `ldconfig -p | grep libnvrtc` unless CUDA_HOME holds NVRTC
FAKE_TE = {
    "transformer_engine/__init__.py": "from transformer_engine import common\n",
    "transformer_engine/common/__init__.py": "import os\nif not os.environ.get('CUDA_HOME', '').endswith("
                                             "'cuda_nvrtc'):\n    raise OSError(\"ldconfig -p | grep 'libnvrtc'\")\n",
}


@pytest.fixture(scope="module")
def plain_env(tmp_path_factory) -> Path:
    """An environment without nemo_rl holding a stand-in transformer_engine and the NVRTC wheel's layout."""
    env = tmp_path_factory.mktemp("env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next(env.glob("lib/python3*/site-packages"))
    (site / "nvidia" / "cuda_nvrtc" / "lib").mkdir(parents=True)
    for name, text in FAKE_TE.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return env


def test_the_hook_loads_the_wheels_libraries_in_an_environment_without_nemo_rl(plain_env, monkeypatch):
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    python = plain_env / "bin" / "python"
    plain = imports.check(python, ["transformer_engine"], cwd=plain_env)
    assert str(plain.failed["transformer_engine"]) == "OSError: ldconfig -p | grep 'libnvrtc'"
    assert imports.check(python, ["transformer_engine"], cwd=plain_env, hook=True).failed == {}
