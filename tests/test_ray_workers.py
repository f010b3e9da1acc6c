"""Ray actors in keyed worker environments, on a real local Ray cluster (one per test session, two nodes)."""

import os
import threading
from pathlib import Path

import forkworld
import pytest

from nemo_rl import workers
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.workers import environments

ROOT = Path(__file__).resolve().parent.parent
BASE, MCORE = "uv run --locked", "uv run --locked --extra mcore"


@pytest.fixture(scope="session")
def ray_world(tmp_path_factory, uv_cache):
    """The fixture project plus Ray (the driver's version), locked; its git and uv settings exported before Ray
    starts, so tasks on every node see the same mirrors and the session's private uv cache."""
    import importlib.metadata

    world = forkworld.make_world(tmp_path_factory.mktemp("rayworld"))
    pyproject = world.project / "pyproject.toml"
    ray_version = importlib.metadata.version("ray")
    pyproject.write_text(pyproject.read_text().replace("dependencies = []", f'dependencies = ["ray=={ray_version}"]'))
    saved = dict(os.environ)
    os.environ.update(world.git_env())
    os.environ.update({"UV_CACHE_DIR": str(uv_cache), "UV_NO_GITHUB_FAST_PATH": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                       # Ray writes ~/.ray/auth_token: the session's Ray gets a home of its own
                       "HOME": str(tmp_path_factory.mktemp("ray-home"))})
    forkworld.uv_run(world, "lock", "--quiet")
    forkworld.make_records(world)
    yield world
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def cluster(ray_world, tmp_path_factory):
    from ray.cluster_utils import Cluster

    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"  # what workers.start_ray does, before any node starts
    # Loopback only: Ray's single-machine mode (its default on macOS and Windows) uses 127.0.0.1 for every node,
    # where node_ip_address="127.0.0.1" alone leaves clients dialling the machine's own address.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False
    os.environ["RAY_TMPDIR"] = str(tmp_path_factory.mktemp("ray"))  # sessions, sockets and logs under the test's tmp
    head = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    head.add_node(num_cpus=1)
    workers.start_ray(address=head.address)
    import ray

    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    yield head
    ray.shutdown()
    head.shutdown()


@pytest.fixture
def venv_dir(tmp_path, monkeypatch, ray_world):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setenv("UV_CACHE_DIR", os.environ["UV_CACHE_DIR"])
    for key, value in ray_world.git_env().items():
        monkeypatch.setenv(key, value)
    return tmp_path / "venvs"


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
    threads = [threading.Thread(target=lambda: results.append(environments.ensure(ray_world.project, ["--locked"])))
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
    old = environments.ensure(ray_world.project, ["--locked", "--extra", "mcore"])
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
    env = environments.ensure(ray_world.project, ["--locked"])
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
    from nemo_rl.project import lockfile

    locked = lockfile.locked_packages(ROOT)["megatron-core"].commit
    assert ray.get(megatron_commit.options(**options).remote()) == locked
