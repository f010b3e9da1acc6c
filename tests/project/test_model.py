"""The project read once (project/model.py)."""

from __future__ import annotations

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project


def test_a_project_directory_that_breaks_a_line_is_refused(tmp_path):
    root = tmp_path / "checkout\nimport os"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    with pytest.raises(NemoRLError, match="the project directory .* contains a newline or another control character"):
        Project.read(root)
