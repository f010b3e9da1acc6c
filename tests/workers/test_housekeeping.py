"""Whether a process runs from an environment, each way it can show it (a Ray worker shows neither its
executable nor its command line: its VIRTUAL_ENV and the files it maps do)."""

import os
import subprocess
import sys
import time

import pytest

from nemo_rl.workers import housekeeping


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
