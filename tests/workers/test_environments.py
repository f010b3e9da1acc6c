"""A worker environment's metadata record (workers.environments.WorkerEnv): written and read by itself, older
files (with keys no one reads) still read, and a file of the wrong shape refused with its path."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from fakes import _cli, env_row, planted_env

from nemo_rl.errors import NemoRLError
from nemo_rl.workers import environments, housekeeping
from nemo_rl.workers.environments import META, WorkerEnv


def record(tmp_path) -> WorkerEnv:
    return WorkerEnv("k" * 24, tmp_path / ("k" * 24), ("--locked", "--extra", "mcore"), tmp_path / "project",
                     "f" * 64)


def test_the_record_reads_back_what_it_wrote_after_the_rename(tmp_path):
    env = record(tmp_path)
    staging = tmp_path / "staging"
    staging.mkdir()
    env.write(staging)
    staging.rename(env.path)  # built beside its final path, then renamed into place
    assert WorkerEnv.read(env.path) == env


def test_a_file_written_before_the_record_still_reads(tmp_path):
    env = record(tmp_path)
    env.path.mkdir()
    (env.path / META).write_text(json.dumps({"key": env.key, "flags": list(env.flags), "project": str(env.project),
                                             "lock_hash": env.lock_hash, "python": "3.12.1", "created": 1.0}))
    assert WorkerEnv.read(env.path) == env


def test_no_file_is_no_environment(tmp_path):
    assert WorkerEnv.read(tmp_path) is None


@pytest.mark.parametrize("change", [
    {"key": "another-key"}, {"flags": "--locked"}, {"flags": [1]}, {"lock_hash": None}, {"project": 3},
])
def test_metadata_of_the_wrong_shape_is_refused(tmp_path, change):
    env = record(tmp_path)
    env.write(tmp_path)
    env.path.mkdir()
    meta = {**json.loads((tmp_path / META).read_text()), **change}
    (env.path / META).write_text(json.dumps(meta))
    with pytest.raises(NemoRLError, match="is not worker-environment metadata") as caught:
        WorkerEnv.read(env.path)
    assert str(env.path) in caught.value.remedy


def test_unreadable_metadata_is_refused(tmp_path):
    (tmp_path / META).write_text("{not json")
    with pytest.raises(NemoRLError, match="cannot read"):
        WorkerEnv.read(tmp_path)


def test_a_worker_environment_path_with_a_newline_is_refused(world, tmp_path):
    root = tmp_path / "venvs\nimport os"
    root.mkdir()
    with pytest.raises(NemoRLError, match="control character"):
        environments._build(world.project, [], environments.Slot(root, "k"), "0" * 64)
    assert list(root.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's entry needs root (chown)")
def test_an_entry_planted_between_the_two_looks_is_never_run(tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[2]
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy(root / name, project / name)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))

    def planted_while_building(project, flags, where, *args, **kwargs):  # a co-user wins the race
        where.path.mkdir()
        (where.path / environments.META).write_text("{}")
        os.chown(where.path, 4242, 4242)

    verified_here: list[object] = []
    monkeypatch.setattr(environments, "_build", planted_while_building)
    monkeypatch.setattr(environments, "verify", lambda *args, **kwargs: verified_here.append(args))
    with pytest.raises(NemoRLError, match="owned by uid 4242"):
        environments.ensure(project, ["--locked"])
    assert verified_here == []
def test_a_fifo_worker_metadata_is_broken_not_a_hang(world, tmp_path):
    venvs = tmp_path / "venvs"
    (venvs / "evil").mkdir(parents=True)
    os.mkfifo(venvs / "evil" / environments.META)
    code, out = _cli(world, {"NEMO_RL_VENV_DIR": str(venvs)}, "envs", "list")
    assert code == 0 and "broken" in out and "not a regular file" in out, out


@pytest.mark.skipif(os.getuid() != 0, reason="making a directory of another user needs root")
def test_another_users_environment_is_never_pruned(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "0" * 24, world.project, None)  # stale by its metadata
    os.chown(env, 54321, -1)
    row = env_row(world.project, env)
    assert row.state == "not ours" and "owned by uid 54321" in (row.detail or "")
    assert env not in housekeeping.prune(world.project) and (env / environments.META).exists()


def test_a_link_in_the_venv_directory_is_never_followed_or_removed(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    target = planted_env(tmp_path / "elsewhere", "0" * 24, world.project, None)
    venvs.mkdir()
    (venvs / target.name).symlink_to(target)
    row = env_row(world.project, venvs / target.name)
    assert row.state == "not ours" and "symbolic link" in (row.detail or "")
    housekeeping.prune(world.project)
    assert (target / environments.META).exists() and (venvs / target.name).is_symlink()


@pytest.mark.parametrize("checkout", ["../x", 12345678901234567890123456789012])
def test_a_metadata_checkout_id_that_is_not_hex_is_broken(world, tmp_path, monkeypatch, checkout):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "0" * 24, world.project, checkout)
    row = env_row(world.project, env)
    assert row.state == "broken" and "checkout id" in (row.detail or "")
