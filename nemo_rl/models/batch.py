"""Masks and positions for a batch of token ids, without megatron.training.

The mask is megatron.core's: bool, True where a query may not attend, broadcastable to [batch, heads, query, key].
"""

from __future__ import annotations

from typing import Any


def causal_mask_and_position_ids(tokens: Any, eod_token: int | None = None, *, reset_position_ids: bool = False,
                                 reset_attention_mask: bool = False) -> tuple[Any, Any]:
    """(attention_mask, position_ids) for a [batch, sequence] tensor of token ids.

    With `eod_token` and a reset, each document (its end token included) restarts positions at 0 and attends only
    within itself.
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
