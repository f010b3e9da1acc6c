"""The torch backend (nemo_rl/models/torch_lm.py) on CPU: forward, backward, causal."""

from __future__ import annotations

from nemo_rl.models import ModelConfig, build_model


def test_torch_backend_forward_backward_on_cpu():
    import torch

    from nemo_rl.models.torch_lm import next_token_loss

    config = ModelConfig(num_layers=1)
    model = build_model(config, "torch")
    tokens = torch.randint(0, config.vocab_size, (2, 8))
    assert model(tokens).shape == (2, 8, config.vocab_size)
    loss = next_token_loss(model, tokens)
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters())
    # causal: the first position's logits ignore later tokens
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % config.vocab_size
    assert torch.allclose(model(tokens)[:, 0], model(changed)[:, 0], atol=1e-5)
