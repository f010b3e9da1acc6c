"""The Megatron GPT backend (nemo_rl/models/megatron_gpt.py) without the mcore extra: the guard's error."""

from __future__ import annotations

import pytest

from nemo_rl import extras
from nemo_rl.errors import MissingExtraError
from nemo_rl.models import ModelConfig, build_model


@pytest.mark.skipif(extras.probe("megatron").present, reason="megatron-core is installed here")
def test_megatron_backend_without_the_extra_raises_the_guard():
    with pytest.raises(MissingExtraError) as info:
        build_model(ModelConfig(), "megatron")
    assert "the Megatron GPT backend needs the mcore extra" in str(info.value)
    assert extras.uv.sync_command() in str(info.value)
