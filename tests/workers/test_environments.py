"""Worker environments (workers/environments.py): the metadata record (WorkerEnv) written and read by itself,
older files (with keys no one reads) still read, a file of the wrong shape refused with its path; and an
environment at this checkout's key that this user did not build for this project, or whose Ray is not the
driver's, never used."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import FLAGS, _cli, env_row, fake_env, planted_env

from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import bytecode, environments, executables, housekeeping, verified
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
        environments._build(Project.read(world.project), [], environments.Slot(root, "k"))
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
        environments.ensure(Project.read(project), ["--locked"])
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
    assert env not in housekeeping.prune(Project.read(world.project)) and (env / environments.META).exists()


def test_a_link_in_the_venv_directory_is_never_followed_or_removed(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    target = planted_env(tmp_path / "elsewhere", "0" * 24, world.project, None)
    venvs.mkdir()
    (venvs / target.name).symlink_to(target)
    row = env_row(world.project, venvs / target.name)
    assert row.state == "not ours" and "symbolic link" in (row.detail or "")
    housekeeping.prune(Project.read(world.project))
    assert (target / environments.META).exists() and (venvs / target.name).is_symlink()


@pytest.mark.parametrize("checkout", ["../x", 12345678901234567890123456789012])
def test_a_metadata_checkout_id_that_is_not_hex_is_broken(world, tmp_path, monkeypatch, checkout):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "0" * 24, world.project, checkout)
    row = env_row(world.project, env)
    assert row.state == "broken" and "checkout id" in (row.detail or "")
def _planted(path, project) -> None:
    """A complete-looking environment of `project`'s key at `path` (metadata and a site-packages)."""
    fake_env(path)
    bytecode.install(path, verified.sites(path))
    meta = {"key": path.name, "flags": FLAGS, "lock_hash": "x", "project": str(project.resolve())}
    (path / environments.META).write_text(json.dumps(meta))


def test_an_environment_an_older_nemo_rl_built_gets_private_bytecode_in_place(world, tmp_path, monkeypatch):
    """Its record may still hold: ensure adds what it lacks (never removing it first: a rebuild offline without a
    bundle would leave nothing) and verifies it in full."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = venvs / environments.key_for(Project.read(world.project), FLAGS)
    _planted(env, world.project)
    shutil.rmtree(env / bytecode.DIR)
    for site in verified.sites(env):
        (site / bytecode.PTH).unlink()

    def build(*args, **kwargs):
        raise RuntimeError("rebuilt")

    checked = []
    monkeypatch.setattr(environments, "_build", build)
    monkeypatch.setattr(environments, "verify", lambda *args, **kwargs: checked.append(args))
    monkeypatch.setattr(verified, "still_verified", lambda *args: False)
    environments.ensure(Project.read(world.project), FLAGS)
    assert checked and bytecode.problem(env, verified.sites(env)) is None


def test_a_link_at_the_key_is_never_used(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    key = environments.key_for(Project.read(world.project), FLAGS)
    target = tmp_path / "theirs" / key
    _planted(target, world.project)
    venvs.mkdir()
    (venvs / key).symlink_to(target)
    with pytest.raises(NemoRLError, match="is a symbolic link, not an environment this user built"):
        environments.ensure(Project.read(world.project), FLAGS)
    assert (venvs / key).is_symlink() and (target / environments.META).exists()  # left as it was


@pytest.mark.skipif(os.getuid() != 0, reason="making a directory of another user needs root")
def test_another_users_environment_at_the_key_is_never_used(world, tmp_path, monkeypatch):
    """Its key is computed from readable inputs (the project's path, uv.lock, flags, Python): in a shared
    NEMO_RL_VENV_DIR a co-user plants it first, then adds a .pth that the verification's import would run."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = venvs / environments.key_for(Project.read(world.project), FLAGS)
    _planted(env, world.project)
    os.chown(env, 54321, -1)
    with pytest.raises(NemoRLError, match="owned by uid 54321, not an environment this user built"):
        environments.ensure(Project.read(world.project), FLAGS)
    # the files verification checks are this user's too: one of another owner is code they may change
    mine = fake_env(tmp_path / "mine")
    (mine / "bin").mkdir()
    planted = next((mine / "lib").glob("python*/site-packages")) / "zz_evil.pth"
    planted.write_text("import os\n")
    os.chmod(planted, 0o644)
    os.chown(planted, 54321, -1)
    assert verified.loose(mine) == [str(planted.relative_to(mine))]


def test_metadata_naming_another_project_is_no_environment_of_this_key(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = venvs / environments.key_for(Project.read(world.project), FLAGS)
    _planted(env, world.project)
    meta = json.loads((env / environments.META).read_text())
    (env / environments.META).write_text(json.dumps({**meta, "project": "relative/p"}))
    with pytest.raises(NemoRLError, match="is not worker-environment metadata"):
        environments.WorkerEnv.read(env)

    def build(*args, **kwargs):
        raise RuntimeError("rebuilt")

    monkeypatch.setattr(environments, "_build", build)
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
