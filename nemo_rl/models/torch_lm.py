"""A small causal transformer LM in plain PyTorch: the default backend."""

from __future__ import annotations

from typing import Any

from nemo_rl.models.config import ModelConfig


def build_torch_lm(config: ModelConfig) -> Any:
    import torch
    from torch import nn

    class CausalLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = config
            self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
            self.position = nn.Embedding(config.max_sequence_length, config.hidden_size)
            layer = nn.TransformerEncoderLayer(config.hidden_size, config.num_attention_heads, config.ffn_size,
                                               dropout=0.0, batch_first=True, norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, config.num_layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(config.hidden_size)
            self.head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            length = tokens.shape[1]
            positions = torch.arange(length, device=tokens.device)
            mask = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
            hidden = self.blocks(self.embed(tokens) + self.position(positions), mask=mask, is_causal=True)
            return self.head(self.norm(hidden))

    torch.manual_seed(config.seed)
    return CausalLM()


def next_token_loss(model: Any, tokens: Any) -> Any:
    """Mean cross-entropy of predicting tokens[:, 1:] from tokens[:, :-1]."""
    import torch.nn.functional as F

    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
