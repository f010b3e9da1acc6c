"""Ray actors in exact worker environments: their options, and the environment on every node."""

from __future__ import annotations

import contextlib
import math
import numbers
import os
from pathlib import Path

from nemo_rl import settings, values
from nemo_rl.errors import NemoRLError
from nemo_rl.progress import progress
from nemo_rl.project.model import Project
from nemo_rl.settings import CHECKOUT_DIR
from nemo_rl.workers import environments, executables


def start_ray(**init_kwargs):
    """ray.init with Ray's `uv run` detection off."""
    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"
    import ray
    from ray._private import ray_constants

    # Ray reads the variable at import, which may have happened already
    ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False  # guard: workers-uv-run-detection-off
    return ray.init(**init_kwargs)


def actor_options(py_executable: str, project: Path | None = None) -> dict:
    """Ray options for an actor in `py_executable`, whose environment is built and verified here."""
    if py_executable == executables.PY_EXECUTABLES.SYSTEM:
        return {}
    env = environments.ensure(Project.read(project or CHECKOUT_DIR), executables.sync_flags(py_executable))
    return {"runtime_env": {
        "py_executable": str(env.python),
        "env_vars": {"VIRTUAL_ENV": str(env.path), "UV_PROJECT_ENVIRONMENT": str(env.path),
                     "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"},
    }}


def prestart(py_executable: str, count: int = 1, project: Path | None = None, keep_alive_s: float = 600) -> int:
    """Have each alive node's raylet start `count` workers (at most its CPUs), idle up to `keep_alive_s`, for actors
    given `actor_options(py_executable)` unchanged; the number asked (0 in a job with its own runtime_env). Returns
    at once: call it once the actors are known, after `prepare_on_every_node` on a cluster."""
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:  # guard: workers-prestart-count-is-a-positive
        raise NemoRLError(f"prestart: count {count!r:.40} ({type(count).__name__}) is not a positive number of "
                          "workers", "pass a positive int, e.g. count=4")
    count = int(count)
    keep_alive = math.ceil(values.timeout_seconds(keep_alive_s, "prestart"))
    options = actor_options(py_executable, project)
    if not options:
        return 0
    import ray

    context = ray.get_runtime_context()
    if context.runtime_env:  # guard: workers-prestart-none-in-a-job-with-its-own
        progress("warning: prestart skipped: this job has a runtime_env of its own; start Ray with "
                 "workers.start_ray and no runtime_env to prestart")
        return 0
    try:
        from google.protobuf import json_format
        from grpc import RpcError
        from ray._private.grpc_utils import init_grpc_channel
        from ray._private.utils import get_runtime_env_info, parse_runtime_env_for_task_or_actor
        from ray.core.generated import common_pb2, node_manager_pb2, node_manager_pb2_grpc, runtime_environment_pb2

        node_manager_pb2.PrestartWorkersRequest  # noqa: B018  # the raylet's call, in the Ray that runs here
    except (ImportError, AttributeError) as exc:
        raise NemoRLError(  # guard: workers-prestart-names-a-ray-without-the-call
            f"prestart needs Ray's PrestartWorkers call, not in Ray {ray.__version__} ({exc})",
            "start the actors without prestart") from exc
    # the runtime env serialized as Ray serializes an actor's: Ray pairs workers with actors by its hash
    info = get_runtime_env_info(parse_runtime_env_for_task_or_actor(options["runtime_env"]), serialize=True)
    env_info = json_format.Parse(info, runtime_environment_pb2.RuntimeEnvInfo())
    job, asked = bytes.fromhex(context.get_job_id()), 0
    for node in (n for n in ray.nodes() if n["Alive"]):
        workers = min(count, int(node["Resources"].get("CPU", 0)))  # guard: workers-prestart-at-most-a-node-s-cpus
        if workers < 1:
            continue
        address = f"{node['NodeManagerAddress']}:{node['NodeManagerPort']}"
        request = node_manager_pb2.PrestartWorkersRequest(
            language=common_pb2.PYTHON, job_id=job, keep_alive_duration_secs=keep_alive, num_workers=workers,
            runtime_env_info=env_info)
        try:
            raylet = node_manager_pb2_grpc.NodeManagerServiceStub(init_grpc_channel(address))
            raylet.PrestartWorkers(request, timeout=30)  # guard: workers-prestart-asks-every-raylet
        except RpcError as exc:
            raise NemoRLError(f"the raylet at {address} did not prestart workers: {exc.details()}",
                              "start the actors without prestart") from exc
        asked += workers
    return asked


def prepare_on_every_node(py_executable: str, project: Path | None = None,
                          bundle: Path | None = None) -> dict[str, str]:
    """Build and verify the environment on each alive node (from `bundle` if given); node id -> python path."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    project = project or CHECKOUT_DIR
    flags = executables.sync_flags(py_executable)
    venv_dir = str(settings.venv_dir())

    @ray.remote(num_cpus=0)
    def build_here() -> str:
        os.environ["NEMO_RL_VENV_DIR"] = venv_dir
        return str(environments.ensure(Project.read(project), flags, bundle=bundle).python)

    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    refs = [build_here.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
            for node in nodes]
    return dict(zip(nodes, ray.get(refs), strict=True))


def wait_ready(actor, env: Path | None, timeout: float = 30.0) -> None:
    """Wait until `actor` runs; after `timeout` seconds kill it and raise NemoRLError with the raylet log's cause."""
    timeout = values.timeout_seconds(timeout, "wait_ready")
    import ray
    from ray.exceptions import GetTimeoutError

    with contextlib.suppress(GetTimeoutError):
        ray.get(actor.__ray_ready__.remote(), timeout=timeout)
        return
    ray.kill(actor)
    cause = _start_failure(env) or "the worker did not register (no error in this node's raylet log)"
    raise NemoRLError(f"a Ray actor in {env or 'the driver environment'} did not start within {timeout:g} s: {cause}",
                      f"run `nemo-rl envs verify` for its PY_EXECUTABLE; remove {env} to have it rebuilt from uv.lock"
                      if env else "check the workers' logs in Ray's session directory")


def _start_failure(env: Path | None) -> str | None:
    import ray

    try:
        logs = Path(ray._private.worker.global_worker.node.get_logs_dir_path())
    except Exception:  # a driver attached to a remote cluster has no local logs
        return None
    cause = None
    for log in sorted(logs.glob("raylet*.err")):
        lines = log.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if env is not None and str(env) not in line:
                continue
            following = [text.split("[0m", 1)[-1].strip() for text in lines[i + 1:i + 40]]
            errors = [text for text in following if "Error" in text and ":" in text and not text.startswith("File")]
            if errors:
                cause = errors[0]  # guard: workers-a-start-failure-names-its-cause
    return cause
