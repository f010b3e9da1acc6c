"""Ray actors in exact worker environments. Ray is the distributed engine; this is only what it needs from us:
the options that start an actor with a verified environment's interpreter, and that environment on every node.

Ray is imported inside the functions: `import nemo_rl` stays light.
"""

from __future__ import annotations

import os
from pathlib import Path

from nemo_rl import settings, values
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.settings import CHECKOUT_DIR
from nemo_rl.workers import environments, executables


def start_ray(**init_kwargs):
    """ray.init with Ray's `uv run` detection off: a driver run under `uv run` (as CI runs pytest) would otherwise
    make Ray package a copy of the working directory for every worker, so workers would import the copy's code
    instead of the checkout's, and our worker environments would be replaced by Ray's own `uv run`."""
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"  # for processes Ray starts from here
    import ray
    from ray._private import ray_constants

    # Ray reads the variable once, when ray_constants is first imported, which may have happened already.
    ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False  # guard: workers-uv-run-detection-off
    return ray.init(**init_kwargs)


def actor_options(py_executable: str, project: Path | None = None) -> dict:
    """Ray options for an actor that must run in `py_executable` (one of executables.PY_EXECUTABLES).

    The environment is built (once) and verified here, in seconds when it exists: a bad environment is a
    NemoRLError before Ray starts any worker with it, never a registration timeout minutes later.
    """
    if py_executable == executables.PY_EXECUTABLES.SYSTEM:
        return {}
    env = environments.ensure(Project.read(project or CHECKOUT_DIR), executables.sync_flags(py_executable))
    return {"runtime_env": {
        "py_executable": str(env.python),
        # self-contained: the env's own VIRTUAL_ENV, and uv pointed at it, whatever the driver had activated
        "env_vars": {"VIRTUAL_ENV": str(env.path), "UV_PROJECT_ENVIRONMENT": str(env.path),
                     "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"},
    }}


def prestart(py_executable: str, count: int = 1, project: Path | None = None) -> list[tuple[int, str]]:
    """Leave `count` idle Ray workers running the environment's interpreter on this cluster, so the next actors
    with `actor_options(py_executable)` start in a worker that has imported Ray already (an actor's start is
    otherwise a new Python importing Ray: seconds, where a default actor takes a worker Ray prestarted at
    ray.init). Runs `count` no-op tasks in the environment at once; Ray keeps their workers idle for reuse, up to
    its soft limit of workers (the node's CPUs) and for as long as it does not reap idle ones. Returns each
    task's (pid, sys.prefix): the workers and the environment they run."""
    import ray

    options = actor_options(py_executable, project)
    if not options:  # the driver's own Python: Ray prestarted those
        return []

    @ray.remote(num_cpus=0)
    def ready() -> tuple[int, str]:
        import sys

        return os.getpid(), sys.prefix

    return ray.get([ready.options(**options).remote() for _ in range(count)])  # guard: workers-prestart-starts-workers-in-the


def prepare_on_every_node(py_executable: str, project: Path | None = None,
                          bundle: Path | None = None) -> dict[str, str]:
    """Build and verify the environment on every alive node (one task pinned to each), as the upstream project
    does; returns node id -> interpreter path, the same path on every node (the key names it). With `bundle` (a
    path every node sees), a node that lacks the environment builds it from the bundle, offline."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    project = project or CHECKOUT_DIR
    flags = executables.sync_flags(py_executable)
    venv_dir = str(settings.venv_dir())

    @ray.remote(num_cpus=0)
    def build_here() -> str:
        os.environ["NEMO_RL_VENV_DIR"] = venv_dir
        return str(environments.ensure(Project.read(project), flags, bundle=bundle).python)  # this node's checkout

    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    refs = [build_here.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
            for node in nodes]
    return dict(zip(nodes, ray.get(refs), strict=True))


def wait_ready(actor, env: Path | None, timeout: float = 30.0) -> None:
    """Wait until `actor` runs; if it has not within `timeout` seconds, end it and raise a NemoRLError with why.

    A worker whose interpreter fails at start (a package deleted after the environment was verified, a broken
    interpreter) never registers, and Ray retries it for minutes before ActorUnschedulableError, with the cause
    only in the raylet's log (ray-project/ray#59342). The cause is read from there: the last error of a
    traceback that names the environment."""
    timeout = values.timeout_seconds(timeout, "wait_ready")
    import ray
    from ray.exceptions import GetTimeoutError

    try:
        ray.get(actor.__ray_ready__.remote(), timeout=timeout)
        return
    except GetTimeoutError:
        pass
    ray.kill(actor)
    cause = _start_failure(env) or "the worker did not register (no error in this node's raylet log)"
    raise NemoRLError(f"a Ray actor in {env or 'the driver environment'} did not start within {timeout:g} s: {cause}",
                      f"run `nemo-rl envs verify` for its PY_EXECUTABLE; remove {env} to have it rebuilt from uv.lock"
                      if env else "check the workers' logs in Ray's session directory")


def _start_failure(env: Path | None) -> str | None:
    import ray

    try:
        logs = Path(ray._private.worker.global_worker.node.get_logs_dir_path())
    except Exception:  # a driver attached to a remote cluster has no local logs: the generic message stays
        return None
    cause = None
    for log in sorted(logs.glob("raylet*.err")):
        lines = log.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if env is not None and str(env) not in line:
                continue
            # the exception line closes the traceback that names the environment
            following = [text.split("[0m", 1)[-1].strip() for text in lines[i + 1:i + 40]]
            errors = [text for text in following if "Error" in text and ":" in text and not text.startswith("File")]
            if errors:
                cause = errors[0]  # guard: workers-a-start-failure-names-its-cause
    return cause
