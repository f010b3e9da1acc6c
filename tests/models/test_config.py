"""ModelConfig's own checks (nemo_rl/models/config.py)."""

from __future__ import annotations

import pytest

from nemo_rl.models import ModelConfig


def test_config_rejects_heads_that_do_not_divide():
    with pytest.raises(ValueError, match="not divisible"):
        ModelConfig(hidden_size=66, num_attention_heads=4)
