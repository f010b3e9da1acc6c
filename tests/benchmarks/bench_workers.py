"""Benchmark: Ray actors started in worker environments, three ways, and the environments themselves.

    uv run python tests/benchmarks/bench_workers.py [--actors 1 4 8] [--repeats 2] [--no-actors] [--no-uv-run]
        [--checkout-env]

In one temporary directory: the hermetic fixture forks (tests/forkworld.py) in a project that also locks the
driver's Ray, a private uv cache, a local Ray cluster under the temporary directory. Measures
  - environment build, cold (empty uv cache) and warm (cache filled, environment removed), and
    `nemo-rl envs verify`;
  - `actor_options(MCORE)` per call: on a verified environment (its record holds and its times have settled:
    verified.RACY_NS after the last change), and after a change (the record no longer holds: the full
    verification with its imports); with --checkout-env also `actor_options(BASE)` for this checkout's base
    environment (torch and Ray: thousands of recorded paths), built from the user's uv cache;
  - actor start-to-first-call for N actors at once with py_executable =
    (0) none (a default actor, the driver's Python), (a) the verified environment's python (nemo-rl),
    (b) `uv run --locked --extra mcore`, (c) `uv run --reinstall --extra mcore` (the upstream project's), and
    (a) again once Ray registered the workers `workers.prestart(MCORE, N)` asked for (idle in the environment, as
    Ray prestarts workers in the driver's Python at ray.init), and how long that took.
Prints a markdown table; writes JSON to benchmark-results/workers.json. Not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import forkworld

from nemo_rl import workers
from nemo_rl.process import run
from nemo_rl.project.model import Project
from nemo_rl.uv import find_uv_bin
from nemo_rl.workers import environments, verified

MCORE = ["--locked", "--extra", "mcore"]
ROOT = Path(__file__).resolve().parents[2]


def world_with_ray(root: Path) -> forkworld.World:
    world = forkworld.make_world(root / "world")
    pyproject = world.project / "pyproject.toml"
    ray_version = importlib.metadata.version("ray")
    pyproject.write_text(pyproject.read_text().replace("dependencies = []", f'dependencies = ["ray=={ray_version}"]'))
    os.environ.update(world.git_env())
    run([find_uv_bin(), "lock", "--quiet"], cwd=world.project)
    return world


def timed(function) -> tuple[float, object]:
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def start_actors(count: int, options: dict) -> float | str:
    """Seconds until every actor answered, or why they did not (the upstream way can fail: see README)."""
    import ray

    @ray.remote(num_cpus=0)
    class Probe:
        def ping(self) -> str:
            import sys

            return sys.prefix

    start = time.perf_counter()
    actors = [Probe.options(**options).remote() for _ in range(count)]
    try:
        ray.get([a.ping.remote() for a in actors], timeout=240)
        result: float | str = time.perf_counter() - start
    except Exception as exc:  # a worker that died, or one that never registered
        result = f"failed after {time.perf_counter() - start:.0f} s: {type(exc).__name__}"
    for actor in actors:
        ray.kill(actor)
    return result


def prestart_then_start(mcore: str, count: int, project: Path, options: dict) -> tuple[float, float | str]:
    """Seconds from `workers.prestart` until the raylet has registered its workers, then `start_actors`."""
    env = options["runtime_env"]["env_vars"]["VIRTUAL_ENV"]
    start = time.perf_counter()
    asked = workers.prestart(mcore, count, project)
    while len(registered_in(env)) < asked and time.perf_counter() - start < 120:
        time.sleep(0.05)
    return time.perf_counter() - start, start_actors(count, options)


def registered_in(env: str) -> set[int]:
    """Pids of the local raylet's registered workers that run `env` (by their VIRTUAL_ENV)."""
    import ray
    from ray._private.grpc_utils import init_grpc_channel
    from ray.core.generated import node_manager_pb2, node_manager_pb2_grpc

    node = ray._private.worker.global_worker.node
    raylet = node_manager_pb2_grpc.NodeManagerServiceStub(init_grpc_channel(
        f"{node.node_ip_address}:{node.node_manager_port}"))
    stats = raylet.GetNodeStats(node_manager_pb2.GetNodeStatsRequest(include_memory_info=False), timeout=30)
    found = set()
    for pid in {s.pid for s in stats.core_workers_stats}:
        try:
            if f"VIRTUAL_ENV={env}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                found.add(pid)
        except OSError:
            continue
    return found


def summary(values: list) -> str:
    failed = [v for v in values if isinstance(v, str)]
    if failed:
        return f"{len(failed)} of {len(values)} runs {failed[0]}"
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f}, n={len(values)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--calls", type=int, default=20, help="actor_options calls timed on a verified environment")
    parser.add_argument("--json-out", type=Path, default=Path("benchmark-results") / "workers.json")
    parser.add_argument("--no-actors", action="store_true", help="no Ray cluster: environments and actor_options only")
    parser.add_argument("--no-uv-run", action="store_true", help="actors: leave out the two `uv run` ways")
    parser.add_argument("--checkout-env", action="store_true",
                        help="also time actor_options(BASE) on this checkout's environment (torch and Ray)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="nemo-rl-bench-workers-"))
    user_cache = os.environ.get("UV_CACHE_DIR")
    os.environ.update({"UV_CACHE_DIR": str(root / "uv-cache"), "NEMO_RL_VENV_DIR": str(root / "venvs"),
                       "NEMO_RL_CACHE_DIR": str(root / "nemo-rl-cache"), "UV_NO_GITHUB_FAST_PATH": "1",
                       "RAY_TMPDIR": str(root / "ray"), "GIT_CONFIG_GLOBAL": os.devnull,
                       # Ray on loopback only (its single-machine mode), as in tests/workers/test_ray_actors.py
                       "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    (root / "ray").mkdir()
    results: dict = {}
    try:
        world = world_with_ray(root)
        project = world.project
        cold, env = timed(lambda: environments.ensure(Project.read(project), MCORE))
        shutil.rmtree(env.path)
        warm, env = timed(lambda: environments.ensure(Project.read(project), MCORE))
        verify = [timed(lambda: run([sys.executable, "-m", "nemo_rl", "envs", "verify", " ".join(["uv", "run",
                                                                                                   *MCORE]),
                                     "--project", str(project)]))[0] for _ in range(5)]
        results["environment"] = {"cold build": cold, "warm build": warm, "envs verify": verify}
        mcore = "uv run " + " ".join(MCORE)
        results["actor_options"] = {
            "fixture forks, verified environment": settled_calls(lambda: workers.actor_options(mcore, project),
                                                                 args.calls),
            "fixture forks, after a change (full verification)": [
                timed(lambda: (verified.forget(env.path), workers.actor_options(mcore, project)))[0]
                for _ in range(3)]}
        if args.checkout_env:
            with cache_of(user_cache):  # torch from the user's uv cache, not downloaded again
                base = "uv run --locked"
                results["actor_options"]["this checkout's base environment (torch, Ray), verified"] = settled_calls(
                    lambda: workers.actor_options(base, ROOT), args.calls)
            env_dir = environments.slot(environments.key_for(Project.read(ROOT), ["--locked"])).path
            results["checkout environment paths"] = len(verified.read(env_dir).dirs) + len(verified.read(env_dir).files)
        for case, calls in results["actor_options"].items():
            print(f"actor_options, {case}: {statistics.median(calls) * 1000:.1f} ms median of {len(calls)}",
                  flush=True)
        if args.no_actors:
            return report(args, argv, root, results)
        workers.start_ray(num_cpus=2, include_dashboard=False)
        uv_env = {"UV_PROJECT_ENVIRONMENT": str(root / "uv-run-env"), "VIRTUAL_ENV": str(root / "uv-run-env")}
        ways = {
            "none: a default actor (the driver's Python)": {},
            "verified environment's python (nemo-rl)": workers.actor_options(mcore, project),
            "`uv run --locked --extra mcore`": {"runtime_env": {
                "py_executable": f"{find_uv_bin()} run --project {project} --locked --extra mcore",
                "env_vars": uv_env}},
            "`uv run --reinstall --extra mcore` (upstream)": {"runtime_env": {
                "py_executable": f"{find_uv_bin()} run --project {project} --reinstall --extra mcore",
                "env_vars": uv_env}},
        }
        if args.no_uv_run:
            ways = dict(list(ways.items())[:2])
        else:
            start_actors(1, ways["`uv run --locked --extra mcore`"])  # make the uv-run environment once
        results["actors"] = {way: {n: [start_actors(n, options) for _ in range(args.repeats)] for n in args.actors}
                             for way, options in ways.items()}
        prestarted = ways["verified environment's python (nemo-rl)"]
        results["actors"]["verified environment's python, after `workers.prestart(MCORE, N)`"] = {
            n: [prestart_then_start(mcore, n, project, prestarted)[1] for _ in range(args.repeats)]
            for n in args.actors}
        results["prestart"] = {n: [prestart_then_start(mcore, n, project, prestarted)[0] for _ in range(args.repeats)]
                               for n in args.actors}
    finally:
        try:
            import ray

            ray.shutdown()
        except Exception:
            pass
        shutil.rmtree(root, ignore_errors=True)
    return report(args, argv, root, results)


def settled_calls(call, count: int) -> list[float]:
    """`call` once (it verifies and records), then timed `count` times once the record's times have settled."""
    call()
    time.sleep(verified.RACY_NS / 1e9 + 0.1)
    call()  # the record holds and its times are kept now
    return [timed(call)[0] for _ in range(count)]


@contextlib.contextmanager
def cache_of(cache: str | None):
    saved = os.environ.pop("UV_CACHE_DIR", None)
    if cache:
        os.environ["UV_CACHE_DIR"] = cache
    try:
        yield
    finally:
        os.environ.pop("UV_CACHE_DIR", None)
        if saved:
            os.environ["UV_CACHE_DIR"] = saved


def report(args: argparse.Namespace, argv: list[str] | None, root: Path, results: dict) -> int:
    shutil.rmtree(root, ignore_errors=True)
    meta = {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "platform": platform.platform(),
            "ray": importlib.metadata.version("ray"),
            "command": " ".join(["uv run python tests/benchmarks/bench_workers.py", *(argv or sys.argv[1:])])}
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({"meta": meta, **results}, indent=2))
    env_results = results["environment"]
    print(f"Worker environments ({meta['date']}, {meta['cores']} cores, load average {os.getloadavg()[0]:.1f}, Ray "
          f"{meta['ray']}; fixture forks):\n")
    print("| metric | time |\n|---|---|")
    print(f"| environment build, cold uv cache | {env_results['cold build']:.2f} s |")
    print(f"| environment build, warm uv cache | {env_results['warm build']:.2f} s |")
    print(f"| `nemo-rl envs verify` | {summary(env_results['envs verify'])} |")
    print("\n`actor_options` per call:\n\n| environment | per call |\n|---|---|")
    for case, values in results["actor_options"].items():
        print(f"| {case} | {statistics.median(values) * 1000:.1f} ms (median; {min(values) * 1000:.1f}–"
              f"{max(values) * 1000:.1f}, n={len(values)}) |")
    if "checkout environment paths" in results:
        print(f"\n(this checkout's base environment: {results['checkout environment paths']} recorded paths)")
    if "actors" not in results:
        return 0
    print("\nActor start to first call, N actors at once:\n")
    print("| py_executable | " + " | ".join(f"N={n}" for n in args.actors) + " |")
    print("|---|" + "---|" * len(args.actors))
    for way, by_n in results["actors"].items():
        print(f"| {way} | " + " | ".join(summary(by_n[n]) for n in args.actors) + " |")
    print("| (`workers.prestart(MCORE, N)` until Ray registered its workers) | "
          + " | ".join(summary(results["prestart"][n]) for n in args.actors) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
