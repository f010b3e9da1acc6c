"""nemo-rl: post-training for LLMs with an opt-in, exactly pinned Megatron backend.

Importing this package must stay cheap and must never import torch, megatron, nemo or
transformer_engine: researchers on the plain PyTorch path and `nemo-rl deps` run without them.
"""

__version__ = "0.1.0"
