"""Model backends chosen by name (nemo_rl/models/__init__.py)."""

from __future__ import annotations

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.models import ModelConfig, build_model


def test_unknown_backend_lists_the_valid_ones():
    with pytest.raises(NemoRLError) as info:
        build_model(ModelConfig(), "jax")
    assert "unknown model backend 'jax'" in str(info.value) and "megatron, torch" in str(info.value)
