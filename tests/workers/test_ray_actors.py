"""Ray actors in keyed worker environments, on a real local Ray cluster (one per test session, two nodes)."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import forkworld
import pytest

from nemo_rl import workers
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import environments, housekeeping

ROOT = Path(__file__).resolve().parents[2]
BASE, MCORE = "uv run --locked", "uv run --locked --extra mcore"


def reporter():
    import ray

    @ray.remote(num_cpus=0)
    class Reporter:
        def facts(self):
            import importlib.metadata
            import json
            import sys

            try:
                text = importlib.metadata.distribution("megatron-core").read_text("direct_url.json")
                commit = json.loads(text)["vcs_info"]["commit_id"]
            except importlib.metadata.PackageNotFoundError:
                commit = None
            nemo_rl_file = None
            try:
                import nemo_rl

                nemo_rl_file = nemo_rl.__file__
            except ImportError:
                pass
            return {"prefix": sys.prefix, "commit": commit, "nemo_rl": nemo_rl_file}

    return Reporter


def facts_of(options):
    import ray

    actor = reporter().options(**options).remote()
    try:
        return ray.get(actor.facts.remote(), timeout=120)
    finally:
        ray.kill(actor)


def test_actors_run_in_their_keyed_environments(cluster, ray_world, venv_dir):
    project = ray_world.project
    base = facts_of(workers.actor_options(BASE, project))
    mcore = facts_of(workers.actor_options(MCORE, project))
    assert Path(base["prefix"]).parent == venv_dir and base["commit"] is None
    assert Path(mcore["prefix"]).parent == venv_dir and mcore["prefix"] != base["prefix"]
    assert mcore["commit"] == ray_world.forks["megatron-core"].head  # the commit uv.lock pins


def test_same_key_at_once_builds_once(cluster, ray_world, venv_dir, capfd):
    results = []
    threads = [threading.Thread(target=lambda: results.append(environments.ensure(Project.read(ray_world.project),
                                                                                  ["--locked"])))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and results[0].path == results[1].path
    assert capfd.readouterr().err.count("building worker environment") == 1


def test_every_node_gets_the_environment_once(cluster, ray_world, venv_dir, capfd):
    paths = workers.prepare_on_every_node(MCORE, ray_world.project)
    assert len(paths) == 2 and len(set(paths.values())) == 1  # one path, valid on every node


def test_bump_gives_a_new_environment_and_prune_removes_the_stale_one(cluster, ray_world, venv_dir, capsys):
    old = environments.ensure(Project.read(ray_world.project), ["--locked", "--extra", "mcore"])
    megatron = ray_world.forks["megatron-core"]
    new_head = forkworld.commit(megatron.fork, "worker change", {"megatron/core/worker.py": "W = 1\n"})
    try:
        assert main(["deps", "bump", "megatron-core", "--rev", new_head, "--project", str(ray_world.project)]) == 0
        facts = facts_of(workers.actor_options(MCORE, ray_world.project))
        assert facts["commit"] == new_head and facts["prefix"] != str(old.path)
        capsys.readouterr()
        assert main(["envs", "list", "--project", str(ray_world.project)]) == 0
        listing = capsys.readouterr().out
        assert f"{old.key}  stale" in listing
        assert main(["envs", "prune", "--project", str(ray_world.project)]) == 0
        assert f"removed {old.path}" in capsys.readouterr().out and not old.path.exists()
    finally:  # the session's world goes back to its pin for the other tests
        assert main(["deps", "bump", "megatron-core", "--rev", megatron.head, "--project",
                     str(ray_world.project)]) == 0


def test_broken_environments_are_refused_in_seconds(cluster, ray_world, venv_dir):
    env = environments.ensure(Project.read(ray_world.project), ["--locked"])
    site = next(env.path.glob("lib/python3*/site-packages"))
    for dist_info in site.glob("ray-*.dist-info"):
        import shutil

        shutil.rmtree(dist_info)  # a package removed by hand
    with pytest.raises(NemoRLError, match="Ray None there"):
        workers.actor_options(BASE, ray_world.project)
    env.python.unlink()  # a nonexistent interpreter
    with pytest.raises(NemoRLError, match="has no interpreter"):
        workers.actor_options(BASE, ray_world.project)


def test_driver_under_uv_run_gives_workers_the_checkout(cluster):
    """CI runs pytest under `uv run`: workers must import this checkout's nemo_rl, not a copy Ray packaged."""
    facts = facts_of({})
    assert facts["nemo_rl"] is not None and Path(facts["nemo_rl"]).resolve().is_relative_to(ROOT)


@pytest.mark.mcore
def test_megatron_actor_reports_the_locked_commit(cluster, venv_dir):
    import ray

    @ray.remote(num_cpus=0)
    def megatron_commit():
        import megatron.core  # noqa: F401

        from nemo_rl.extras import installed_commit

        return installed_commit("megatron-core")

    options = workers.actor_options(MCORE, ROOT)

    locked = Project.read(ROOT).packages["megatron-core"].commit
    assert ray.get(megatron_commit.options(**options).remote()) == locked


def stale_lock(project):
    """Make every environment of `project` stale (uv.lock's bytes change, so the key does); undo with the result."""
    lock = project / "uv.lock"
    text = lock.read_text()
    lock.write_text(text + "\n")
    return lambda: lock.write_text(text)


def test_prune_never_removes_an_environment_a_ray_worker_uses(cluster, ray_world, venv_dir, capsys):
    import ray

    options = workers.actor_options(BASE, ray_world.project)
    env_path = Path(options["runtime_env"]["env_vars"]["VIRTUAL_ENV"])
    actor = reporter().options(**options).remote()
    assert ray.get(actor.facts.remote(), timeout=120)["prefix"] == str(env_path)
    restore = stale_lock(ray_world.project)
    try:
        assert main(["envs", "list", "--project", str(ray_world.project)]) == 0
        assert "stale (in use: pid" in capsys.readouterr().out  # its title is ray::Reporter, its exe the base python
        assert main(["envs", "prune", "--project", str(ray_world.project)]) == 0
        assert "nothing to prune" in capsys.readouterr().out
        assert env_path.exists()
        assert ray.get(actor.facts.remote(), timeout=60)["prefix"] == str(env_path)  # and it still works
        ray.kill(actor)
        for _ in range(100):  # the worker process exits shortly after the kill
            if not housekeeping.users(env_path):
                break
            time.sleep(0.1)
        assert main(["envs", "prune", "--project", str(ray_world.project)]) == 0
        assert f"removed {env_path}" in capsys.readouterr().out
    finally:
        restore()


def test_two_checkouts_sharing_a_venv_dir_get_their_own_environments(ray_world, venv_dir, tmp_path, capsys):
    other = tmp_path / "other-checkout"
    shutil.copytree(ray_world.project, other, ignore=shutil.ignore_patterns(".venv", ".nemo-rl"))
    mine = environments.ensure(Project.read(ray_world.project), ["--locked"])
    theirs = environments.ensure(Project.read(other), ["--locked"])
    assert mine.path != theirs.path  # each holds an editable install of its own checkout's code
    assert main(["envs", "list", "--project", str(other)]) == 0
    out = capsys.readouterr().out
    assert f"{mine.key}  other checkout" in out and f"of {ray_world.project}" in out
    assert f"{theirs.key}  current" in out
    restore = stale_lock(other)
    try:
        assert main(["envs", "prune", "--project", str(other)]) == 0
        out = capsys.readouterr().out
        assert f"removed {theirs.path}" in out and mine.path.exists()  # the other checkout's is not ours to prune
    finally:
        restore()


def test_a_killed_build_is_listed_then_cleaned_up(ray_world, venv_dir, capsys):
    build = subprocess.Popen([sys.executable, "-m", "nemo_rl", "envs", "build", "BASE", "--project",
                              str(ray_world.project)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):  # strike once the build has written files
        staged = list(venv_dir.glob(".*.building-*/pyvenv.cfg"))
        if staged:
            break
        time.sleep(0.05)
    build.kill()
    build.wait()
    assert staged, "the build never started"
    leftover = staged[0].parent
    assert leftover.exists()
    assert main(["envs", "list", "--project", str(ray_world.project)]) == 0
    assert "unfinished build" in capsys.readouterr().out
    env = environments.ensure(Project.read(ray_world.project), ["--locked"])  # the next build of the key removes it
    assert not leftover.exists() and env.python.exists()
    other_leftover = venv_dir / f".{'0' * 24}.building-1"  # another key's, its builder gone
    (other_leftover / "lib").mkdir(parents=True)
    assert main(["envs", "prune", "--project", str(ray_world.project)]) == 0
    assert f"removed {other_leftover}" in capsys.readouterr().out and env.path.exists()


def test_verification_imports_what_a_worker_needs(cluster, ray_world, venv_dir):
    env = environments.ensure(Project.read(ray_world.project), ["--locked", "--extra", "mcore"])
    site = next(env.path.glob("lib/python3*/site-packages"))
    shutil.rmtree(site / "msgpack")  # `import ray` needs it; Ray's metadata still says 2.x
    started = time.monotonic()
    with pytest.raises(NemoRLError, match="import ray fails"):
        workers.actor_options(MCORE, ray_world.project)
    assert time.monotonic() - started < 30
    shutil.rmtree(env.path)
    env = environments.ensure(Project.read(ray_world.project), ["--locked", "--extra", "mcore"])
    site = next(env.path.glob("lib/python3*/site-packages"))
    shutil.rmtree(site / "megatron")
    for dist_info in site.glob("megatron_core-*.dist-info"):
        shutil.rmtree(dist_info)  # the fork gone entirely: its commit is no longer "missing, so skipped"
    with pytest.raises(NemoRLError, match="megatron-core is missing there"):
        workers.actor_options(MCORE, ray_world.project)
    shutil.rmtree(env.path)
    env = environments.ensure(Project.read(ray_world.project), ["--locked"])
    shutil.rmtree(next(env.path.glob("lib/python3*/site-packages")) / "ray")  # package gone, metadata kept
    with pytest.raises(NemoRLError, match="import ray fails"):
        environments.verify(environments.describe(env.path), Project.read(ray_world.project))


def test_an_unusable_venv_dir_names_the_setting(ray_world, tmp_path, monkeypatch, capsys):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(not_a_dir))
    assert main(["envs", "build", "BASE", "--project", str(ray_world.project)]) == 1
    assert f"NEMO_RL_VENV_DIR {not_a_dir} cannot be used" in capsys.readouterr().err
    with pytest.raises(NemoRLError, match="NEMO_RL_VENV_DIR"):
        workers.actor_options(BASE, ray_world.project)
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o700)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(read_only))
    monkeypatch.setattr(os, "access", lambda path, mode: str(path) != str(read_only))  # root writes anywhere
    with pytest.raises(NemoRLError, match=f"NEMO_RL_VENV_DIR {read_only} cannot be used"):
        workers.actor_options(BASE, ray_world.project)
    assert main(["envs", "build", "BASE", "--project", str(ray_world.project)]) == 1


def test_a_waiting_build_says_who_builds(ray_world, venv_dir):
    where = environments.slot(environments.key_for(Project.read(ray_world.project), ["--locked"]))
    with where.locked():
        waiter = subprocess.Popen([sys.executable, "-m", "nemo_rl", "envs", "build", "BASE", "--project",
                                   str(ray_world.project)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = waiter.stderr.readline()
    assert f"waiting for pid {os.getpid()}" in line and "since" in line
    assert waiter.wait(timeout=300) == 0
    assert "the other build finished" in waiter.stderr.read()


def test_envs_build_of_an_unknown_name_is_a_usage_error(ray_world, venv_dir, capsys):
    assert main(["envs", "build", "NOPE", "--project", str(ray_world.project)]) == 2
    assert "unknown PY_EXECUTABLE 'NOPE'" in capsys.readouterr().err


def test_another_python_is_another_environment(ray_world, venv_dir, monkeypatch):
    env = environments.ensure(Project.read(ray_world.project), ["--locked"])
    key = environments.key_for(Project.read(ray_world.project), ["--locked"])
    import platform

    monkeypatch.setattr(platform, "python_version", lambda: "3.12.99")  # the driver moved to another Python
    assert environments.key_for(Project.read(ray_world.project), ["--locked"]) != key
    with pytest.raises(NemoRLError, match="Python 3.12.[0-9]+ there, 3.12.99 in the driver"):
        environments.verify(env, Project.read(ray_world.project))


def test_environment_metadata_of_the_wrong_shape_lists_as_broken(ray_world, venv_dir, capsys):
    env = environments.ensure(Project.read(ray_world.project), ["--locked"])
    (env.path / environments.META).write_text('{"version": 1}')  # hand-edited
    assert main(["envs", "list", "--project", str(ray_world.project)]) == 0  # was exit 3 for every listing
    out = capsys.readouterr().out
    assert f"{env.key}  broken" in out and "is not worker-environment metadata" in out
    with pytest.raises(NemoRLError, match="is not worker-environment metadata"):
        environments.ensure(Project.read(ray_world.project), ["--locked"])
    assert main(["envs", "prune", "--project", str(ray_world.project)]) == 0
    out = capsys.readouterr().out  # nothing says whose it is: listed with its rm -rf, never removed
    assert f"rm -rf {env.path}" in out and "removed" not in out and env.path.exists(), out


def test_a_worker_that_cannot_start_is_an_error_with_its_cause(cluster, ray_world, venv_dir):
    """Broken after verification (the window actor_options cannot close): the cause, not Ray's retry loop."""
    options = workers.actor_options(BASE, ray_world.project)
    env = Path(options["runtime_env"]["env_vars"]["VIRTUAL_ENV"])
    shutil.rmtree(next(env.glob("lib/python3*/site-packages")) / "msgpack")
    actor = reporter().options(**options).remote()
    with pytest.raises(NemoRLError, match="No module named 'msgpack'") as failure:
        workers.wait_ready(actor, env, timeout=20)
    assert "did not start within 20 s" in failure.value.what and str(env) in failure.value.remedy


def test_a_verified_environment_is_checked_again_only_when_it_changed(ray_world, venv_dir, monkeypatch):
    """The imports run once; afterwards a file added deep in a package, a loaded module edited in place, a record
    for another uv.lock or driver, a record of the wrong shape, or a change during the check brings them back."""
    from nemo_rl import imports
    from nemo_rl.workers import verified

    env = environments.ensure(Project.read(ray_world.project), ["--locked"])
    calls = []
    real = imports.check
    strike = []

    def counted(*args, **kwargs):
        calls.append(args)
        result = real(*args, **kwargs)
        if strike:  # something changes while the check runs
            (strike.pop() / "during.txt").write_text("x")
        return result

    monkeypatch.setattr(environments.imports, "check", counted)

    def again() -> int:
        before = len(calls)
        environments.ensure(Project.read(ray_world.project), ["--locked"])
        return len(calls) - before

    assert again() == 0  # verified once, recorded
    site = next(env.path.glob("lib/python3*/site-packages"))
    deep = max((d for d in (site / "ray").rglob("*") if d.is_dir() and "__pycache__" not in d.parts),
               key=lambda d: len(d.parts))
    (deep / "stray.txt").write_text("x")  # not a file any import loaded: its directory changed
    assert again() == 1 and again() == 0
    loaded = site / "msgpack" / "__init__.py"  # `import ray` loads it
    loaded.write_bytes(loaded.read_bytes())  # in place: the directory is as it was, the file's ctime is not
    assert again() == 1 and again() == 0
    record = json.loads((env.path / verified.RECORD).read_text())
    (env.path / verified.RECORD).write_text(json.dumps({**record, "lock_hash": "0" * 64}))
    assert again() == 1 and again() == 0
    with monkeypatch.context() as moved:
        moved.setattr(verified, "driver_ray", lambda prefix: "0.0.1")  # the driver's Ray moved
        assert again() == 1
    assert again() == 0
    (env.path / verified.RECORD).write_text("{}")
    assert again() == 1 and again() == 0
    strike.append(deep)
    (env.path / verified.RECORD).write_text("{}")
    assert again() == 1 and again() == 1  # the state moved during the first check: nothing was recorded
    assert again() == 0


def test_a_worker_environment_whose_fork_is_not_what_the_lock_says_is_refused(ray_world, venv_dir):
    """The locked commit installed, but its own metadata says another version than uv.lock: the worker would run
    a megatron-core the lock does not describe."""
    env = environments.ensure(Project.read(ray_world.project), ["--locked", "--extra", "mcore"])
    site = next(env.path.glob("lib/python3*/site-packages"))
    metadata = next(site.glob("megatron_core-*.dist-info")) / "METADATA"
    text = metadata.read_text()
    metadata.unlink()  # a hard link into uv's cache, which later tests install from: a new file, not an edit
    metadata.write_text(text.replace("\nVersion: 0.1.0\n", "\nVersion: 0.9.0\n", 1))
    with pytest.raises(NemoRLError, match="megatron-core 0.9.0 is installed but uv.lock says 0.1.0") as caught:
        environments.verify(env, Project.read(ray_world.project))
    assert "nemo-rl deps patches megatron-core" in str(caught.value)


def idle_workers_in(env: Path, count: int, timeout: float = 60) -> set[int]:
    """Pids of Ray workers running `env` (their VIRTUAL_ENV) that the raylets have registered, once each node has
    `count` of them: an actor may be placed on either node."""
    import ray
    from ray._private.grpc_utils import init_grpc_channel
    from ray.core.generated import node_manager_pb2, node_manager_pb2_grpc

    raylets = [node_manager_pb2_grpc.NodeManagerServiceStub(init_grpc_channel(
        f"{n['NodeManagerAddress']}:{n['NodeManagerPort']}")) for n in ray.nodes() if n["Alive"]]
    marker = f"VIRTUAL_ENV={env}".encode()
    deadline = time.monotonic() + timeout
    while True:
        running = set()
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if marker in (proc / "environ").read_bytes().split(b"\0"):
                    running.add(int(proc.name))
            except OSError:
                continue
        per_node = [running & {stats.pid for stats in raylet.GetNodeStats(
            node_manager_pb2.GetNodeStatsRequest(include_memory_info=False), timeout=30).core_workers_stats}
            for raylet in raylets]
        if all(len(pids) >= count for pids in per_node) or time.monotonic() > deadline:
            return set().union(*per_node)
        time.sleep(0.2)


def test_prestarted_workers_wait_in_the_environment_for_the_next_actors(ray_world, venv_dir, cluster):
    import ray

    env = environments.ensure(Project.read(ray_world.project), ["--locked"])
    assert workers.prestart(BASE, 5, ray_world.project) == 3  # at most each node's CPUs: 2 and 1
    assert idle_workers_in(env.path, 1)  # Ray may start fewer while other workers start
    time.sleep(3)  # past Ray's reaping of idle workers above its soft limit: these are kept
    waiting = idle_workers_in(env.path, 1)
    actor = reporter().options(**workers.actor_options(BASE, ray_world.project)).remote()
    try:
        assert ray.get(actor.__ray_call__.remote(lambda self: os.getpid()), timeout=60) in waiting
    finally:
        ray.kill(actor)
    assert workers.prestart(workers.PY_EXECUTABLES.SYSTEM) == 0


def test_prestart_in_a_job_with_its_own_runtime_env_asks_for_nothing(ray_world, venv_dir, cluster, monkeypatch,
                                                                    capsys):
    """Ray merges a job's runtime_env into each actor's: workers prestarted without it would match no actor."""
    import ray

    context = ray.get_runtime_context()
    monkeypatch.setattr(type(context), "runtime_env", property(lambda self: {"env_vars": {"JOB": "1"}}))
    assert workers.prestart(BASE, 1, ray_world.project) == 0
    assert "runtime_env of its own" in capsys.readouterr().err
    import numpy

    monkeypatch.undo()
    assert workers.prestart(BASE, numpy.int64(1), ray_world.project) == 2  # a count numpy gave is a count


def test_prestart_on_a_ray_without_the_raylet_call_names_it(ray_world, venv_dir, cluster, monkeypatch):
    from ray.core.generated import node_manager_pb2

    monkeypatch.delattr(node_manager_pb2, "PrestartWorkersRequest")  # as in a Ray before the call
    with pytest.raises(NemoRLError, match="prestart needs Ray's PrestartWorkers call") as refused:
        workers.prestart(BASE, 1, ray_world.project)
    assert "start the actors without prestart" in refused.value.remedy


@pytest.mark.parametrize(("count", "keep_alive_s"), [(0, 600), (True, 600), (1.5, 600), (1, 0), (1, float("nan"))])
def test_prestart_refuses_what_is_no_number_of_workers_or_seconds(count, keep_alive_s):
    with pytest.raises(NemoRLError, match="prestart: .* (positive number of workers|seconds above zero)"):
        workers.prestart(BASE, count, keep_alive_s=keep_alive_s)
