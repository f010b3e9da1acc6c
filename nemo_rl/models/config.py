"""One config for every backend: a run's torch and Megatron models describe one network."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 128
    hidden_size: int = 64
    num_layers: int = 2
    num_attention_heads: int = 4
    ffn_hidden_size: int | None = None  # None: 4 * hidden_size, as in GPT
    max_sequence_length: int = 32
    seed: int = 1234

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by "
                             f"num_attention_heads {self.num_attention_heads}")

    @property
    def ffn_size(self) -> int:
        return self.ffn_hidden_size or 4 * self.hidden_size
