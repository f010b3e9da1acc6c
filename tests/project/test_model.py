"""The project read once (project/model.py)."""

from __future__ import annotations

import collections
import os
import sys

import pytest

from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project

_opened: list[str] | None = None  # while a test counts: each path opened


def _count_opens(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_count_opens)  # an audit hook stays for the session: it counts only inside a test


def test_a_project_directory_that_breaks_a_line_is_refused_until_moved(tmp_path):
    root = tmp_path / "checkout\nimport os"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(NemoRLError, match="the project directory .* contains a newline or another control character"):
        Project.read(root)
    root.rename(tmp_path / "checkout")  # the fix: a path without control characters
    assert Project.read(tmp_path / "checkout").root == tmp_path / "checkout"


def test_a_directory_that_is_not_the_project_is_passed_over_whatever_its_path(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n[tool.nemo-rl.forks]\n")
    other = tmp_path / "exp\nrun"
    other.mkdir()
    (other / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    monkeypatch.chdir(other)
    assert Project.find().root == tmp_path


@pytest.mark.parametrize("verb", [["deps", "status"], ["deps", "verify"], ["deps", "patches", "--check", "--offline"],
                                  ["deps", "upstream"], ["doctor"], ["envs", "list"]], ids=" ".join)
def test_a_command_opens_pyproject_toml_and_uv_lock_once(world, capsys, verb):
    global _opened
    _opened = []
    try:
        main([*verb, "--project", str(world.project)])
    finally:
        opened, _opened = collections.Counter(_opened), None
    capsys.readouterr()
    for name in ("pyproject.toml", "uv.lock"):
        assert opened[str(world.project / name)] == 1, (name, opened)
