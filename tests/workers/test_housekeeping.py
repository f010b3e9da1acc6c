"""Whether a process runs from an environment, each way it can show it (a Ray worker shows neither its
executable nor its command line: its VIRTUAL_ENV and the files it maps do)."""

import json
import os
import subprocess
import sys
import time

import pytest
from fakes import FLAGS, deps, env_row, fake_env, planted_env

from nemo_rl.project import develop_state, identity
from nemo_rl.workers import environments, housekeeping


@pytest.fixture
def env(tmp_path):
    path = tmp_path / "venvs" / "key"
    (path / "lib").mkdir(parents=True)
    (path / "lib" / "module.bin").write_bytes(b"\0" * 4096)
    return path


def started(*args, env=None):
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


WAIT = "import sys, time; print('ready', flush=True); time.sleep(60)"


def test_a_process_naming_the_environment_in_its_command_line(env):
    proc = started(sys.executable, "-c", WAIT, str(env / "lib" / "module.bin"))
    try:
        assert proc.pid in housekeeping.users(env)
    finally:
        proc.kill()


def test_a_process_whose_virtual_env_is_the_environment(env):
    proc = started(sys.executable, "-c", WAIT, env={**os.environ, "VIRTUAL_ENV": str(env)})
    try:
        assert proc.pid in housekeeping.users(env)
    finally:
        proc.kill()


def test_a_process_mapping_a_file_of_the_environment(env):
    code = ("import mmap, sys, time; f = open(sys.argv[1].replace('@', '/'), 'rb'); "
            "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); print('ready', flush=True); time.sleep(60)")
    # the path is passed disguised, so the command line does not name the environment
    proc = started(sys.executable, "-c", code, str(env / "lib" / "module.bin").replace("/", "@"))
    try:
        assert proc.pid in housekeeping.users(env)
    finally:
        proc.kill()


def test_an_unrelated_process_is_not_a_user(env, tmp_path):
    other = tmp_path / "venvs" / "key-other"  # a sibling whose name starts like it
    proc = started(sys.executable, "-c", WAIT, env={**os.environ, "VIRTUAL_ENV": str(other)})
    try:
        time.sleep(0.1)
        assert proc.pid not in housekeeping.users(env)
    finally:
        proc.kill()


def test_a_killed_bundle_build_leaves_a_working_cache_that_prune_removes(tmp_path, monkeypatch):
    from nemo_rl.workers import bundle_trust

    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    (tmp_path / "venvs").mkdir()
    dead, killed = bundle_trust.new_work_cache(tmp_path / "venvs")
    os.close(killed)  # its build was killed
    live, held = bundle_trust.new_work_cache(tmp_path / "venvs")  # a node build still running
    for path in (dead, live):
        (path / bundle_trust.CACHE / "wheels-v8").mkdir(parents=True)
    try:
        assert {row.path for row in housekeeping.listing(None) if row.state == "unfinished build"} == {dead, live}
        assert housekeeping.prune(None) == [dead]
        assert not dead.exists() and live.exists()
    finally:
        os.close(held)


def test_a_checkout_at_the_same_path_in_another_container_keeps_its_environments(world, tmp_path, monkeypatch):
    """Containers A and B at one checkout path share NEMO_RL_VENV_DIR; /proc in B does not show A's workers. A's
    environment carries A's develop token: B lists it as another checkout's and never prunes it."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "driver")))
    assert deps(world, "develop", "megatron-core") == 0
    key_a = "0" * 24  # stale to B: not the key of B's uv.lock
    env_a = fake_env(venvs / key_a)
    (env_a / environments.META).write_text(json.dumps({"key": key_a, "flags": FLAGS, "lock_hash": "x",
                                                       "project": str(world.project)}))
    environments._overlay_developed(world.project, env_a)  # A's token
    state = develop_state.read(world.project)  # B: the same path, its own .nemo-rl
    develop_state.write(world.project, {d: e.__class__(e.distribution, e.checkout, e.managed, e.envs,
                                                       develop_state.new_token()) for d, e in state.items()})
    rows = {r.path: r for r in housekeeping.listing(world.project)}
    assert rows[env_a].state == "other checkout"
    assert "another container's checkout at this path" in (rows[env_a].detail or "")
    assert env_a not in housekeeping.prune(world.project) and env_a.exists()
    develop_state.write(world.project, state)  # A itself: its own environment, stale, is pruned
    assert housekeeping.listing(world.project)[0].state == "stale"


def test_an_environment_another_checkout_at_this_path_built_is_left_to_it(world, tmp_path, monkeypatch):
    """Containers A and B hold different checkouts at one path and share NEMO_RL_VENV_DIR, no develop running:
    A's environment is stale to B's uv.lock, and B's /proc does not show A's workers. Its checkout id says whose."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs, ours = "a" * 32, identity.ensure_checkout_id(world.project)
    env_a = planted_env(venvs, "0" * 24, world.project, theirs)
    row = env_row(world.project, env_a)
    assert row.state == "other checkout" and "not this checkout's .nemo-rl/checkout-id" in (row.detail or ""), row
    assert env_a not in housekeeping.prune(world.project) and env_a.exists()
    (world.project / identity.ID_FILE).write_text(theirs + "\n")  # A itself: its own stale environment goes
    assert env_row(world.project, env_a).state == "stale"
    assert env_a in housekeeping.prune(world.project) and not env_a.exists()
    assert ours != theirs


def test_a_checkout_without_an_id_prunes_no_environment_that_has_one(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "0" * 24, world.project, "b" * 32)
    assert identity.checkout_id(world.project) is None
    assert env_row(world.project, env).state == "other checkout"
    assert env not in housekeeping.prune(world.project)
    older = planted_env(venvs, "1" * 24, world.project, None)  # built before ids: this path's, as before
    assert env_row(world.project, older).state == "stale"
