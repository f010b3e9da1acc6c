"""Model configs and backends, chosen by name; backends import torch and megatron inside their builders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nemo_rl.errors import NemoRLError
from nemo_rl.models.config import ModelConfig


def _torch_backend(config: ModelConfig) -> Any:
    from nemo_rl.models.torch_lm import build_torch_lm

    return build_torch_lm(config)


def _megatron_backend(config: ModelConfig) -> Any:
    from nemo_rl.models.megatron_gpt import build_megatron_gpt

    return build_megatron_gpt(config)


BACKENDS: dict[str, Callable[[ModelConfig], Any]] = {"torch": _torch_backend, "megatron": _megatron_backend}


def build_model(config: ModelConfig, backend: str) -> Any:
    if backend not in BACKENDS:
        raise NemoRLError(f"unknown model backend {backend!r}", f"choose one of: {', '.join(sorted(BACKENDS))}")
    return BACKENDS[backend](config)


__all__ = ["BACKENDS", "ModelConfig", "build_model"]
