"""Distributed workers: Ray actors started in exact environments built from uv.lock."""

from nemo_rl.workers.executables import PY_EXECUTABLES, create_local_venv
from nemo_rl.workers.ray_actors import actor_options, prepare_on_every_node, prestart, start_ray, wait_ready

__all__ = ["PY_EXECUTABLES", "actor_options", "create_local_venv", "prepare_on_every_node", "prestart", "start_ray",
           "wait_ready"]
