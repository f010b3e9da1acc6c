"""nemo-rl: post-training for LLMs with an opt-in, exactly pinned Megatron backend.

Importing it imports no torch, megatron, nemo or transformer_engine."""

__version__ = "0.1.0"
