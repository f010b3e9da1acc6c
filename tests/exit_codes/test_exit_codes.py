"""Exit codes across verbs: a user's mistake (a bad argument, a bad project path, a broken uv.lock or
pyproject.toml, an odd setting) is exit 1 or 2, never 3."""

from __future__ import annotations

import re

from fakes import deps

from nemo_rl.cli import main


def test_mistakes_are_exit_1_or_2_never_3(world, tmp_path, capsys, monkeypatch):
    assert deps(world, "bump", "megatron-core", "--branch", "") == 2
    assert main(["deps", "status", "--project", str(world.project / "pyproject.toml")]) == 1
    assert main(["deps", "status", "--project", str(world.project / "no-such-dir")]) == 1
    lock = world.project / "uv.lock"
    good_lock = lock.read_text()
    lock.write_text(re.sub(r'(?m)^name = "megatron-core"', 'name = ["megatron-core"]', good_lock))
    assert deps(world, "status") == 1
    assert "without a name" in capsys.readouterr().err
    lock.write_text(good_lock)
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace('mcore = ["megatron-core", "nemo-toolkit"]',
                                             'mcore = ["megatron-core", "nemo-toolkit", "not a requirement!"]')
                    .replace('requires-python = ">=3.10"', 'requires-python = "not a spec"'))
    assert deps(world, "verify", "megatron-core") == 1
    assert "has an invalid requirement" in capsys.readouterr().err
    assert main(["doctor", "--extra", "mcore", "--project", str(world.project)]) == 1
    assert "cannot read requires-python" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", "~/x")
    assert deps(world, "patches", "--check") in (0, 1)
    assert not (tmp_path / "~").exists()
