"""The Megatron GPT backend, built from the shared ModelConfig."""

from __future__ import annotations

import os
import socket
from typing import Any

from nemo_rl import extras
from nemo_rl.errors import NemoRLError
from nemo_rl.models.batch import causal_mask_and_position_ids
from nemo_rl.models.config import ModelConfig


def init_parallel_state(backend: str | None = None) -> str:  # pragma: mcore
    """Initialise torch.distributed and Megatron's parallel state at world size 1; returns the backend."""
    extras.require("megatron", purpose="Megatron parallel-state initialisation")
    import torch
    from megatron.core import parallel_state

    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if not torch.distributed.is_initialized():
        with socket.socket() as sock:  # a free port: concurrent runs on one host
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        torch.distributed.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", world_size=1, rank=0)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
    return backend


def destroy_parallel_state() -> None:  # pragma: mcore
    import torch
    from megatron.core import parallel_state

    parallel_state.destroy_model_parallel()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def build_megatron_gpt(config: ModelConfig, *, use_transformer_engine: bool = False) -> Any:  # pragma: mcore
    """A GPTModel for `config` after init_parallel_state; local layer spec unless `use_transformer_engine`."""
    extras.require("megatron", purpose="the Megatron GPT backend")
    if use_transformer_engine:
        extras.require("transformer_engine", purpose="the Megatron transformer-engine layer spec")
    import torch
    from megatron.core import tensor_parallel
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import (
        get_gpt_layer_local_spec,
        get_gpt_layer_with_transformer_engine_spec,
    )
    from megatron.core.transformer.transformer_config import TransformerConfig

    on_gpu = torch.cuda.is_available()
    torch.manual_seed(config.seed)
    if on_gpu:
        tensor_parallel.model_parallel_cuda_manual_seed(config.seed)
    transformer_config = TransformerConfig(
        num_layers=config.num_layers,
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        ffn_hidden_size=config.ffn_size,
        use_cpu_initialization=not on_gpu,
        params_dtype=torch.float32,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        # TE 2.3 allocates CUDA streams for activation offloading even with cpu_offloading off
        cpu_offloading_activations=on_gpu,
    )
    spec = get_gpt_layer_with_transformer_engine_spec() if use_transformer_engine else get_gpt_layer_local_spec()
    model = GPTModel(config=transformer_config, transformer_layer_spec=spec, vocab_size=config.vocab_size,
                     max_sequence_length=config.max_sequence_length)
    return model.cuda() if on_gpu else model


def gpt_forward_backward(model: Any, config: ModelConfig, batch_size: int = 2) -> float:  # pragma: mcore
    """One forward/backward with a next-token loss; returns the loss. Needs a GPU."""
    import torch

    device = next(model.parameters()).device
    if device.type != "cuda" or not torch.cuda.is_available():
        raise NemoRLError(f"the Megatron GPT forward/backward needs a CUDA device; the model is on {device}",
                          "run it on a machine with an NVIDIA GPU")
    length = config.max_sequence_length
    tokens = torch.randint(0, config.vocab_size, (batch_size, length), device=device)
    mask, positions = causal_mask_and_position_ids(tokens)
    losses = model(tokens, positions, mask, labels=torch.roll(tokens, -1, dims=1))
    loss = losses.float().mean()
    loss.backward()
    return float(loss.detach())
