"""Batch preparation (models/batch.py): the causal mask and position ids, against a plain reference."""

from __future__ import annotations


def test_causal_mask_and_position_ids_match_a_reference():
    import torch

    from nemo_rl.models.batch import causal_mask_and_position_ids

    eod = 0
    tokens = torch.tensor([[5, 1, 0, 7, 8, 0, 3, 4], [0, 2, 2, 2, 0, 0, 2, 2], [3] * 8])
    mask, positions = causal_mask_and_position_ids(tokens, eod, reset_position_ids=True, reset_attention_mask=True)
    for b, row in enumerate(tokens.tolist()):
        document, position, docs, pos = 0, 0, [], []
        for token in row:  # the reference: walk the sequence, an EOD ends its own document
            docs.append(document)
            pos.append(position)
            position += 1
            if token == eod:
                document, position = document + 1, 0
        assert positions[b].tolist() == pos
        for q in range(8):
            for k in range(8):
                assert bool(mask[b, 0, q, k]) == (k > q or docs[q] != docs[k]), (b, q, k)
    plain_mask, plain_positions = causal_mask_and_position_ids(tokens)
    assert plain_mask.shape == (1, 1, 8, 8) and plain_positions.tolist() == [list(range(8))] * 3
    assert plain_mask[0, 0].tolist() == [[k > q for k in range(8)] for q in range(8)]
