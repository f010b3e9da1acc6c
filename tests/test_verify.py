"""`deps verify`'s pure parts (deps/verify.py): the modules it imports, the extra that pulls a fork in, and
where a missing module's requirement goes. A pyproject.toml in a temporary directory, no environment built."""

from __future__ import annotations

import pytest

from nemo_rl.deps import verify
from nemo_rl.errors import NemoRLError
from nemo_rl.project import lockfile

FORK = lockfile.Fork("megatron-core", "https://forks.nemo-rl.invalid/m.git", "a" * 40, "main",
                     "https://upstream.nemo-rl.invalid/m.git", "main", None)


def write(tmp_path, text: str):
    (tmp_path / "pyproject.toml").write_text(text)
    return tmp_path


def test_the_modules_nemo_rl_relies_on_are_imported_once_each():
    found = verify.modules_for("megatron-core")
    assert "megatron.core" in found and len(found) == len(set(found))
    assert verify.modules_for("no-such-distribution") == []


def test_the_extra_that_requires_the_fork(tmp_path):
    project = write(tmp_path, '[project]\nname = "p"\nversion = "0"\n[project.optional-dependencies]\n'
                              'docs = ["sphinx"]\nmcore = ["Megatron_Core>=0.1", "nemo-toolkit"]\n')
    assert verify.extra_for(project, "megatron-core") == "mcore"
    with pytest.raises(NemoRLError, match="no extra in \\[project.optional-dependencies\\] requires torch"):
        verify.extra_for(project, "torch")


def test_a_missing_module_goes_to_the_add_list_of_a_derived_entry_else_to_the_entry(tmp_path):
    (tmp_path / "plain").mkdir()
    plain = write(tmp_path / "plain", '[project]\nname = "p"\nversion = "0"\n[tool.nemo-rl.forks.megatron-core]\n')
    line = verify.fix_line(plain, FORK, "einops")
    assert line.startswith('add "einops" to requires-dist of the [[tool.uv.dependency-metadata]] entry')
    (tmp_path / "derived").mkdir()
    derived = write(tmp_path / "derived", '[project]\nname = "p"\nversion = "0"\n[tool.nemo-rl.forks.megatron-core]\n'
                                          'drop = [{ name = "wandb", why = "logging" }]\n')
    line = verify.fix_line(derived, FORK, "einops")
    assert line.startswith('add { requirement = "einops", why = "<what imports it>" } to add = [...] in '
                           "[tool.nemo-rl.forks.megatron-core]")
    assert "`nemo-rl deps patches megatron-core`" in line
