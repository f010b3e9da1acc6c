import json

import forkworld
from gitfixtures import git

from nemo_rl.cli import main


def status_json(world, capsys, env) -> dict:
    capsys.readouterr()
    assert main(["deps", "status", "--json", "--project", str(world.project), "--env", str(env)]) == 0
    return {row["distribution"]: row for row in json.loads(capsys.readouterr().out)["forks"]}


def test_status_walks_every_state(world, tmp_path, capsys):
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    rows = status_json(world, capsys, env)
    assert {r["state"] for r in rows.values()} == {"not installed"}
    megatron = world.forks["megatron-core"]
    assert rows["megatron-core"]["pinned_rev"] == rows["megatron-core"]["locked_commit"] == megatron.head

    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    rows = status_json(world, capsys, env)
    assert {r["state"] for r in rows.values()} == {"ok"}
    assert rows["megatron-core"]["installed_commit"] == megatron.head

    # The fork moves; bump re-pins and relocks, so the environment is now behind the lock.
    new_head = forkworld.commit(megatron.fork, "more tokens", {"megatron/core/more.py": "X = 1\n"})
    assert main(["deps", "bump", "megatron-core", "--branch", "nemo-rl/main", "--project", str(world.project)]) == 0
    rows = status_json(world, capsys, env)
    assert rows["megatron-core"]["state"] == "env stale"
    assert rows["megatron-core"]["locked_commit"] == new_head
    assert "uv sync --extra mcore" in rows["megatron-core"]["remedy"]
    assert main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)]) == 1

    # A plain sync (no --reinstall) sees the locked commit changed and installs it.
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    rows = status_json(world, capsys, env)
    assert rows["megatron-core"]["state"] == "ok" and rows["megatron-core"]["installed_commit"] == new_head
    assert main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)]) == 0

    # Editing pyproject's rev by hand without relocking is a stale lock.
    pyproject = world.project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(new_head, megatron.head))
    rows = status_json(world, capsys, env)
    assert rows["megatron-core"]["state"] == "lock stale"
    assert "uv lock --upgrade-package megatron-core" in rows["megatron-core"]["remedy"]


def test_status_json_schema(world, tmp_path, capsys):
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    assert main(["deps", "status", "--json", "--project", str(world.project), "--env", str(env)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"schema", "project", "environment", "forks"} and data["schema"] == 1
    expected = {"distribution", "url", "branch", "pinned_rev", "locked_commit", "installed_commit",
                "installed_version", "upstream_url", "upstream_base", "downstream_commits", "state", "remedy"}
    for row in data["forks"]:
        assert set(row) == expected
        assert row["state"] in {"ok", "lock stale", "env stale", "not installed"}
    assert [r["distribution"] for r in data["forks"]] == ["megatron-core", "nemo-toolkit"]


def test_status_refuses_a_directory_that_is_no_environment(world, tmp_path, capsys):
    assert main(["deps", "status", "--project", str(world.project), "--env", str(tmp_path / "nothing")]) == 1
    assert "is not a Python environment" in capsys.readouterr().err


def test_status_text_names_the_remedy(world, tmp_path, capsys):
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    assert main(["deps", "status", "--project", str(world.project), "--env", str(env)]) == 0
    out = capsys.readouterr().out
    assert "megatron-core: not installed" in out
    assert git(world.forks["nemo-toolkit"].fork, "rev-parse", "HEAD")[:12] in out
