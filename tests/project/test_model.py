"""The project read once (project/model.py)."""

from __future__ import annotations

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project


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
