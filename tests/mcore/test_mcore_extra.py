"""Run only where the mcore extra works (the `mcore` marker skips with the probe's reason elsewhere)."""

import importlib

import pytest

from nemo_rl import extras
from nemo_rl.doctor import smoke
from nemo_rl.models import ModelConfig, build_model

pytestmark = pytest.mark.mcore


@pytest.fixture
def parallel_state():
    from nemo_rl.models.megatron_gpt import destroy_parallel_state, init_parallel_state

    backend = init_parallel_state()
    yield backend
    destroy_parallel_state()


def test_parallel_state_world_size_one(parallel_state):
    import torch
    from megatron.core import parallel_state as ps

    assert parallel_state == ("nccl" if torch.cuda.is_available() else "gloo")
    assert ps.get_tensor_model_parallel_world_size() == 1 and ps.get_data_parallel_world_size() == 1


def test_gpt_builds_from_the_shared_config(parallel_state):
    config = ModelConfig(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=128)
    model = build_model(config, "megatron")
    assert type(model).__name__ == "GPTModel"
    assert len(model.decoder.layers) == 2
    assert sum(p.numel() for p in model.parameters()) > 0


@pytest.mark.parametrize("module", extras.component("nemo").entry_points)
def test_nemo_tron_entry_points_import(module):
    importlib.import_module(module)


@pytest.mark.gpu
def test_gpt_forward_backward_on_gpu(parallel_state):
    from nemo_rl.models.megatron_gpt import build_megatron_gpt, gpt_forward_backward

    config = ModelConfig()
    loss = gpt_forward_backward(build_megatron_gpt(config), config)
    assert loss == loss and loss > 0  # finite and positive cross-entropy


@pytest.mark.gpu
def test_transformer_engine_linear_and_fp8_gating():
    result = smoke.run_check(smoke.CHECKS[6], verbose=True)
    assert result.status in {"pass", "skip"}, result
    fp8 = smoke.run_check(smoke.CHECKS[7], verbose=True)
    assert fp8.status in {"pass", "skip"}, fp8
    if fp8.status == "skip" and "compute capability" in fp8.detail:
        import torch

        assert torch.cuda.get_device_capability() < (8, 9)
