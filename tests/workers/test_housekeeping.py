"""Housekeeping of worker environments and bundles (workers/housekeeping.py): whether a process runs from an
environment, each way it can show it (a Ray worker shows neither its executable nor its command line: its
VIRTUAL_ENV and the files it maps do), and what `envs prune` removes, lists or leaves."""

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import FLAGS, deps, env_row, fake_env, planted_env

from nemo_rl import settings
from nemo_rl.project import develop_state, identity
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_copy, environments, housekeeping


@pytest.fixture
def env(tmp_path):
    path = tmp_path / "venvs" / "key"
    path.parent.mkdir(mode=0o700)
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


def test_a_killed_bundle_build_leaves_a_copy_that_prune_removes(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    (tmp_path / "venvs").mkdir(mode=0o700)
    dead, killed = bundle_copy.new_copy_dir(tmp_path / "venvs")
    os.close(killed)  # its build was killed
    live, held = bundle_copy.new_copy_dir(tmp_path / "venvs")  # a node build still running
    for path in (dead, live):
        (path / bundle_copy.CACHE / "wheels-v8").mkdir(parents=True)
    (dead / bundle_copy.CACHE / "wheels-v8" / "w").write_bytes(b"\0" * 2_000_000)
    os.link(dead / bundle_copy.CACHE / "wheels-v8" / "w", dead / "w")  # as its working cache links it
    try:
        rows = {row.path: row for row in housekeeping.listing(None) if row.state == "unfinished build"}
        assert set(rows) == {dead, live} and rows[dead].size_mb == 2.0  # a file of two names counted once
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
    (env_a / environments.META).write_text(json.dumps({"version": 1, "key": key_a, "flags": FLAGS, "lock_hash": "x",
                                                       "project": str(world.project)}))
    develop_state.install_overlays(env_a, world.project, develop_state.read(world.project))  # A's token
    state = develop_state.read(world.project)  # B: the same path, its own .nemo-rl
    develop_state.write(world.project, {d: e.__class__(e.distribution, e.checkout, e.managed, e.envs,
                                                       develop_state.new_token()) for d, e in state.items()})
    rows = {r.path: r for r in housekeeping.listing(Project.read(world.project))}
    assert rows[env_a].state == "other checkout"
    assert "develop.json does not record" in (rows[env_a].detail or "")
    assert env_a not in housekeeping.prune(Project.read(world.project)) and env_a.exists()
    develop_state.write(world.project, state)  # A itself: its own environment, stale, is pruned
    assert housekeeping.listing(Project.read(world.project))[0].state == "stale"


def test_an_environment_another_checkout_at_this_path_built_is_left_to_it(world, tmp_path, monkeypatch):
    """Containers A and B hold different checkouts at one path and share NEMO_RL_VENV_DIR, no develop running:
    A's environment is stale to B's uv.lock, and B's /proc does not show A's workers. Its checkout id says whose."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs, ours = "a" * 32, identity.ensure_checkout_id(world.project)
    env_a = planted_env(venvs, "0" * 24, world.project, theirs)
    row = env_row(world.project, env_a)
    assert row.state == "other checkout" and "not this checkout's .nemo-rl/checkout-id" in (row.detail or ""), row
    assert env_a not in housekeeping.prune(Project.read(world.project)) and env_a.exists()
    (world.project / identity.ID_FILE).write_text(theirs + "\n")  # A itself: its own stale environment goes
    assert env_row(world.project, env_a).state == "stale"
    assert env_a in housekeeping.prune(Project.read(world.project)) and not env_a.exists()
    assert ours != theirs


def test_a_checkout_without_an_id_prunes_no_environment_that_has_one(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "0" * 24, world.project, "b" * 32)
    assert identity.checkout_id(world.project) is None
    assert env_row(world.project, env).state == "other checkout"
    assert env not in housekeeping.prune(Project.read(world.project))
    older = planted_env(venvs, "1" * 24, world.project, None)  # built before ids: this path's, as before
    assert env_row(world.project, older).state == "stale"
def _broken_envs(world, venvs: Path) -> dict[str, Path]:
    from fakes import planted_env as _planted_env

    from nemo_rl.project import identity
    from nemo_rl.workers import environments

    ours = identity.ensure_checkout_id(world.project)
    made = {"bad metadata": fake_env(venvs / "bad")}
    (made["bad metadata"] / environments.META).write_text("{")
    made["fifo metadata"] = fake_env(venvs / "fifo")
    os.mkfifo(made["fifo metadata"] / environments.META)
    made["linked metadata"] = fake_env(venvs / "linked")
    (venvs / "meta-elsewhere.json").write_text("{}")
    (made["linked metadata"] / environments.META).symlink_to(venvs / "meta-elsewhere.json")
    original = _planted_env(venvs, "1" * 24, world.project, ours)
    made["a cp -a backup"] = venvs / f"{'1' * 24}-backup"
    subprocess.run(["cp", "-a", str(original), str(made["a cp -a backup"])], check=True)
    return made


def test_prune_removes_only_what_it_proves_ours_and_lists_the_rest(world, tmp_path, monkeypatch, capsys):
    """Broken entries (metadata that does not read, a FIFO or a link for it, a key that is not the directory's
    name: a user's `cp -a` backup) are listed with the exact `rm -rf`, never removed; a stale environment of this
    checkout is removed, and with it its key's lock file."""
    from nemo_rl.cli import main
    from nemo_rl.workers import environments, housekeeping

    venvs = tmp_path / "venvs"
    venvs.mkdir(mode=0o700)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    broken = _broken_envs(world, venvs)
    stale = venvs / ("1" * 24)
    with environments.Slot(venvs, stale.name).locked():  # a build of it once made its lock file
        pass
    rows = {r.path: r for r in housekeeping.listing(Project.read(world.project))}
    for kind, path in broken.items():
        assert rows[path].state == "broken", (kind, rows[path])
        assert f"rm -rf {path}" in rows[path].detail, (kind, rows[path].detail)
    capsys.readouterr()
    assert main(["envs", "prune", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    for kind, path in broken.items():
        assert path.exists() and f"left {path} (broken)" in out, (kind, out)
    assert not stale.exists() and not (venvs / f".{stale.name}.lock").exists(), out
    assert f"removed {stale}" in out


def test_prune_removes_free_lock_files_and_leaves_held_ones(world, tmp_path, monkeypatch):
    """A key's lock file with no environment, and a bundle destination's pack lock, are removed when nobody holds
    them; one held (a build or a pack starting now) stays, and so does the lock of a key whose environment is there."""
    from nemo_rl import locks
    from nemo_rl.workers import housekeeping

    venvs, bundles_dir = tmp_path / "venvs", tmp_path / "bundles"
    bundles_dir.mkdir()
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundles_dir))
    fake_env(venvs / ("2" * 24))
    lock = {name: root / name for root, name in ((venvs, f".{'2' * 24}.lock"), (venvs, f".{'3' * 24}.lock"),
                                                 (venvs, f".{'4' * 24}.lock"), (bundles_dir, ".b1.pack-lock"),
                                                 (bundles_dir, ".b2.pack-lock"))}
    lock["not a key's"] = venvs / ".notes.lock"  # a user's own file in the directory: not ours to remove
    for path in lock.values():
        path.write_text("")
    held = [locks.lock_file(lock[f".{'4' * 24}.lock"], None), locks.lock_file(lock[".b2.pack-lock"], None)]
    try:
        removed = housekeeping.prune(Project.read(world.project))
    finally:
        for fd in held:
            os.close(fd)
    assert set(removed) == {lock[f".{'3' * 24}.lock"], lock[".b1.pack-lock"]}, removed
    assert {p.name for p in lock.values() if p.exists()} == {f".{'2' * 24}.lock", f".{'4' * 24}.lock",
                                                              ".b2.pack-lock", ".notes.lock"}


def test_an_overlay_this_checkout_no_longer_records_is_kept_with_its_rm(world, tmp_path, monkeypatch):
    """`rm .nemo-rl/develop.json` (or an edited token) while a worker environment carries the overlay looks, from
    here, exactly like a copy of this checkout (an image: one id in every container) developing in another
    container: the environment is kept, whatever id it records, and its row gives the rm -rf for the user who
    knows. An environment of another id without an overlay names that id and its rm -rf too."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    ours = identity.ensure_checkout_id(world.project)
    for key, checkout in (("0" * 24, ours), ("1" * 24, "c" * 32)):  # this id; another (before `git clean -fdx`)
        env = planted_env(venvs, key, world.project, checkout)
        develop_state.install_overlay(env, tmp_path, "megatron-core", tmp_path / "co", "ab" * 16)
        row = env_row(world.project, env)
        assert row.state == "other checkout" and f"rm -rf {shlex.quote(str(env))}" in (row.detail or ""), row
        assert "does not record" in (row.detail or "")
        assert env not in housekeeping.prune(Project.read(world.project)) and env.exists()
    plain = planted_env(venvs, "2" * 24, world.project, "c" * 32)
    row = env_row(world.project, plain)
    assert row.state == "other checkout" and "checkout id cccccccc" in (row.detail or "")
    assert f"rm -rf {shlex.quote(str(plain))}" in (row.detail or ""), row
    assert plain not in housekeeping.prune(Project.read(world.project)) and plain.exists()


def test_an_environment_of_another_metadata_version_is_listed_and_pruned_once_unused(tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "a" * 24, tmp_path / "project", None)
    meta = json.loads((env / environments.META).read_text())
    (env / environments.META).write_text(json.dumps({**meta, "version": 0}))
    assert settings.venv_dir() == venvs
    job = started(sys.executable, "-c", WAIT, env={**os.environ, "VIRTUAL_ENV": str(env)})
    try:
        [row] = housekeeping.listing(None)
        assert (row.path, row.state, row.users) == (env, "other version", (job.pid,))
        assert housekeeping.prune(None) == []
        assert env.is_dir()
    finally:
        job.kill()
        job.wait()
    assert housekeeping.prune(None) == [env, venvs / f".{env.name}.lock"]
    assert not env.exists()


def test_an_empty_unmarked_node_copy_is_a_killed_builds(world, tmp_path, monkeypatch):
    import tempfile

    venvs = tmp_path / "venvs"
    venvs.mkdir(mode=0o700)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    killed = Path(tempfile.mkdtemp(prefix=bundle_copy.NODE_COPY_PREFIX, dir=venvs))  # SIGKILL before the marker
    assert killed in housekeeping.prune(Project.read(world.project)) and not killed.exists()
