"""The Python executables workers ask for (workers/executables.py): the named ones, and what create_local_venv
cannot honour."""

from __future__ import annotations

import sys

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.workers import executables


def test_py_executables():
    assert executables.PY_EXECUTABLES.SYSTEM == sys.executable
    assert executables.PY_EXECUTABLES.BASE == "uv run --locked"
    assert executables.PY_EXECUTABLES.MCORE == "uv run --locked --extra mcore"
    assert "--reinstall" not in executables.PY_EXECUTABLES.MCORE


@pytest.mark.parametrize("py_executable, name", [("python3 -m foo", "ok"), ("uv run --reinstall", "ok")])
def test_create_local_venv_refuses_what_it_cannot_honour(py_executable, name):
    with pytest.raises(NemoRLError):
        executables.create_local_venv(py_executable, name)
