"""What nemo-rl's Megatron path needs from a batch of token ids, without megatron.training.

Git-installed megatron-core packages `megatron.core` only, so `megatron.training.utils` (where Megatron keeps
its left-to-right mask helper) is not there. Conventions follow megatron.core's attention: the mask is a
bool tensor where True means "may not attend", broadcastable to [batch, heads, query, key].
"""

from __future__ import annotations

from typing import Any


def causal_mask_and_position_ids(tokens: Any, eod_token: int | None = None, *, reset_position_ids: bool = False,
                                 reset_attention_mask: bool = False) -> tuple[Any, Any]:
    """(attention_mask, position_ids) for a [batch, sequence] tensor of token ids.

    Without resets: one causal mask [1, 1, s, s] shared by the batch and positions 0..s-1. With `eod_token`
    and the resets, each document (ending at an end-of-document token, which belongs to it) restarts its
    positions at 0 and attends only within itself: the mask becomes [batch, 1, s, s].
    """
    import torch

    if tokens.dim() != 2:
        raise ValueError(f"tokens must be [batch, sequence], got shape {tuple(tokens.shape)}")
    batch, length = tokens.shape
    device = tokens.device
    index = torch.arange(length, device=device)
    causal = index.unsqueeze(0) > index.unsqueeze(1)  # [query, key]: True above the diagonal
    if eod_token is None or not (reset_position_ids or reset_attention_mask):
        return causal.view(1, 1, length, length), index.unsqueeze(0).expand(batch, -1).clone()
    is_eod = (tokens == eod_token).long()
    # the document a position belongs to: how many documents ended strictly before it
    document = torch.cumsum(is_eod, dim=1) - is_eod
    if reset_attention_mask:
        other_document = document.unsqueeze(2) != document.unsqueeze(1)  # [batch, query, key]
        mask = (causal.unsqueeze(0) | other_document).unsqueeze(1)
    else:
        mask = causal.view(1, 1, length, length)
    if reset_position_ids:
        # a document starts right after an end-of-document token; its first position index is carried forward
        starts = torch.where(torch.nn.functional.pad(is_eod[:, :-1], (1, 0)).bool(), index, torch.zeros_like(index))
        positions = index - torch.cummax(starts, dim=1).values
    else:
        positions = index.unsqueeze(0).expand(batch, -1).clone()
    return mask, positions
