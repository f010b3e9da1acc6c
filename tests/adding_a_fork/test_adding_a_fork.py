"""A third fork, added as docs/contributing.md says: its [tool.nemo-rl.forks.<dist>] table (with [tool.uv.sources]
and the extra) and `nemo-rl deps patches DIST`, nothing else; `deps status`, `deps verify`, `doctor --extra mcore`
and the worker environments' verification all see it."""

from __future__ import annotations

import json
import shutil

import forkworld
import pytest
import tomlkit

from nemo_rl import extras
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import environments, verified

BRIDGE = "megatron-bridge"


def add_bridge(world, monkeypatch) -> forkworld.Fork:
    return forkworld.add_fork(world, monkeypatch, BRIDGE, "megatron.bridge", "megatron-bridge")


def set_module(world, module: str) -> None:
    path = world.project / "pyproject.toml"
    doc = tomlkit.parse(path.read_text())
    doc["tool"]["nemo-rl"]["forks"][BRIDGE]["module"] = module
    path.write_text(tomlkit.dumps(doc))


def test_deps_patches_locks_the_added_fork_and_status_shows_it(world, monkeypatch, capsys):
    bridge = add_bridge(world, monkeypatch)
    out = capsys.readouterr().out
    assert f"{BRIDGE}: 2 downstream commit(s) over {bridge.base[:12]}" in out
    assert f"{BRIDGE} was not in uv.lock: locked" in out
    project = str(world.project)
    assert main(["deps", "patches", "--check", "--offline", "--project", project]) == 0
    assert f"{BRIDGE}: ok" in capsys.readouterr().out
    assert main(["deps", "status", "--json", "--project", project]) == 0
    rows = {row["distribution"]: row for row in json.loads(capsys.readouterr().out)["forks"]}
    assert rows[BRIDGE]["locked_commit"] == bridge.head and rows[BRIDGE]["pinned_rev"] == bridge.head


def test_deps_verify_imports_the_module_the_added_forks_table_names(world, monkeypatch, capsys):
    add_bridge(world, monkeypatch)
    assert main(["deps", "verify", BRIDGE, "--project", str(world.project)]) == 0
    assert f"{BRIDGE}: import megatron.bridge: ok" in capsys.readouterr().out
    set_module(world, "megatron.bridge.missing")
    assert main(["deps", "verify", BRIDGE, "--project", str(world.project)]) == 1
    assert f"{BRIDGE}: import megatron.bridge.missing: FAILED: ModuleNotFoundError" in capsys.readouterr().out


def test_doctor_extra_mcore_requires_the_added_fork(world, monkeypatch, capsys):
    bridge = add_bridge(world, monkeypatch)
    capsys.readouterr()
    assert main(["doctor", "--extra", "mcore", "--json", "--project", str(world.project)]) == 1
    report = json.loads(capsys.readouterr().out)
    rows = {row["distribution"]: row for row in report["components"]}
    assert list(rows) == ["megatron-core", "nemo-toolkit", BRIDGE, "transformer-engine"]
    assert rows[BRIDGE]["name"] == BRIDGE and rows[BRIDGE]["module"] == "megatron.bridge"
    assert (rows[BRIDGE]["state"], rows[BRIDGE]["locked_commit"]) == ("not installed", bridge.head)
    assert rows[BRIDGE]["remedy"] == extras.SYNC_REMEDY
    assert f"{BRIDGE}: not installed" in report["problems"]


def test_worker_verification_imports_the_added_forks_module(ray_world, venv_dir, tmp_path, monkeypatch):
    world = forkworld.copy_world(ray_world, tmp_path / "world")
    forkworld.apply_env(world, monkeypatch)
    add_bridge(world, monkeypatch)
    env = environments.ensure(Project.read(world.project), ["--locked", "--extra", "mcore"])
    assert "megatron.bridge" in verified.read(env.path).modules
    site = next(env.path.glob("lib/python3*/site-packages"))
    shutil.rmtree(site / "megatron" / "bridge")  # the fork's files gone, its metadata kept
    with pytest.raises(NemoRLError, match="import megatron.bridge fails"):
        environments.verify(environments.describe(env.path), Project.read(world.project))
