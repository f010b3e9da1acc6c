"""Worker environments (workers/environments.py): the metadata record (WorkerEnv) written and read by itself,
older files (with keys no one reads) still read, a file of the wrong shape refused with its path; and an
environment at this checkout's key that this user did not build for this project, or whose Ray is not the
driver's, never used."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fakes import FLAGS, _cli, env_row, fake_env, planted_env

from nemo_rl import codec
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import environments, executables
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


def test_metadata_of_another_version_is_told_apart_from_none(tmp_path):
    env = record(tmp_path)
    env.path.mkdir()
    env.write(env.path)
    meta = json.loads((env.path / META).read_text())
    (env.path / META).write_text(json.dumps({**meta, "version": 0}))
    with pytest.raises(codec.AnotherVersion, match="worker-environment metadata of another nemo-rl"):
        WorkerEnv.read(env.path)


def test_another_metadata_version_gets_another_key(tmp_path, monkeypatch):
    key = environments._key(tmp_path, "f" * 64, FLAGS, {})
    monkeypatch.setattr(environments, "META_VERSION", environments.META_VERSION + 1)
    assert environments._key(tmp_path, "f" * 64, FLAGS, {}) != key


def test_a_build_never_removes_an_environment_a_process_runs_from(world, tmp_path, monkeypatch):
    env = _planted_at_key(world, tmp_path, monkeypatch, version=0)
    job = subprocess.Popen(["sleep", "60"], env={**os.environ, "VIRTUAL_ENV": str(env)})
    try:
        with pytest.raises(NemoRLError, match=f"processes {job.pid} run from it") as refused:
            environments.ensure(Project.read(world.project), FLAGS)
        assert refused.value.remedy == "stop those processes and ask again"
        assert (env / "pyvenv.cfg").is_file()
    finally:
        job.kill()
        job.wait()

    def venv(*args, **kwargs):
        raise RuntimeError("rebuilt")

    monkeypatch.setattr(environments.uv, "venv", venv)
    with pytest.raises(RuntimeError, match="rebuilt"):  # the fix followed: nothing runs from it, so it is rebuilt
        environments.ensure(Project.read(world.project), FLAGS)
    assert not env.exists()


def test_a_worker_environment_path_with_a_newline_is_refused(world, tmp_path):
    root = tmp_path / "venvs\nimport os"
    root.mkdir()
    with pytest.raises(NemoRLError, match="control character"):
        environments._build(Project.read(world.project), [], environments.Slot(root, "k"), None, None)
    assert list(root.iterdir()) == []


def test_a_fifo_worker_metadata_is_broken_not_a_hang(world, tmp_path):
    venvs = tmp_path / "venvs"
    venvs.mkdir(mode=0o700)
    (venvs / "evil").mkdir()
    os.mkfifo(venvs / "evil" / environments.META)
    code, out = _cli(world, {"NEMO_RL_VENV_DIR": str(venvs)}, "envs", "list")
    assert code == 0 and "broken" in out and "not a regular file" in out, out


@pytest.mark.parametrize("checkout", ["../x", 12345678901234567890123456789012])
def test_a_metadata_checkout_id_that_is_not_hex_is_broken(world, tmp_path, monkeypatch, checkout):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "0" * 24, world.project, checkout)
    row = env_row(world.project, env)
    assert row.state == "broken" and "checkout" in (row.detail or "")
def _planted(path, project) -> None:
    """A complete-looking environment of `project`'s key at `path` (metadata and a site-packages)."""
    fake_env(path)
    meta = {"version": 1, "key": path.name, "flags": FLAGS, "lock_hash": "x", "project": str(project.resolve())}
    (path / environments.META).write_text(json.dumps(meta))

def _planted_at_key(world, tmp_path, monkeypatch, **meta):
    """_planted at this project's key in a fresh NEMO_RL_VENV_DIR, its metadata changed by `meta`."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = venvs / environments.key_for(Project.read(world.project), FLAGS)
    _planted(env, world.project)
    written = json.loads((env / environments.META).read_text())
    (env / environments.META).write_text(json.dumps({**written, **meta}))
    return env


def test_metadata_naming_another_project_is_no_environment_of_this_key(world, tmp_path, monkeypatch):
    env = _planted_at_key(world, tmp_path, monkeypatch, project="relative/p")
    with pytest.raises(NemoRLError, match="is not worker-environment metadata"):
        environments.WorkerEnv.read(env)

    def build(*args, **kwargs):
        raise RuntimeError("rebuilt")

    monkeypatch.setattr(environments, "_build", build)
    meta = json.loads((env / environments.META).read_text())
    (env / environments.META).write_text(json.dumps({**meta, "project": str(tmp_path / "elsewhere")}))
    with pytest.raises(RuntimeError, match="rebuilt"):  # not used as this checkout's
        environments.ensure(Project.read(world.project), FLAGS)


def test_create_local_venv_refuses_an_environment_without_the_drivers_ray(tmp_path, monkeypatch):
    """Workers are Ray actors: an environment whose Ray differs from the driver's is refused before use."""
    project = tmp_path / "tiny"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "tiny"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = []\n'
        "[project.optional-dependencies]\nextra1 = []\n[tool.uv]\npackage = false\n")
    subprocess.run([sys.executable, "-m", "uv", "lock", "--quiet"], cwd=project, check=True)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    with pytest.raises(NemoRLError, match="Ray None there"):
        executables.create_local_venv("uv run --locked --extra extra1", "worker-1", project=project)
    built = [p for p in (tmp_path / "venvs").iterdir() if not p.name.startswith(".")]
    assert len(built) == 1 and (built[0] / "bin" / "python").exists()  # built once, keyed, then refused
    assert executables.create_local_venv(executables.PY_EXECUTABLES.SYSTEM, "ignored") == sys.executable
