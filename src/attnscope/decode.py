"""Decoding with the KV cache: greedy search over a batch of sources."""
from __future__ import annotations

import torch
from torch import Tensor

from attnscope.config import BOS_ID, EOS_ID, PAD_ID
from attnscope.model import DecoderCache, Transformer


def default_max_len(model: Transformer, src_len: int) -> int:
    """Target budget: generous for translation, never past the positional table."""
    return min(model.config.max_len, 2 * src_len + 10)


@torch.no_grad()
def greedy_batch(model: Transformer, src: Tensor, max_len: int | None = None) -> list[list[int]]:
    """Greedy decoding of padded sources (B, S); returns each target's ids without specials."""
    max_len = max_len or default_max_len(model, src.shape[1])
    memory, src_mask = model.encode(src)
    cache = DecoderCache.empty(len(model.decoder))
    b = src.shape[0]
    token = torch.full((b, 1), BOS_ID, dtype=torch.long, device=src.device)
    out = torch.full((b, 0), PAD_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        logits = model.decode(token, memory, src_mask, cache)[:, -1]  # (B, V)
        token = logits.argmax(-1).masked_fill(done, PAD_ID).unsqueeze(1)  # (B, 1)
        out = torch.cat([out, token], dim=1)
        done |= token.squeeze(1) == EOS_ID
        if bool(done.all()):
            break
    return [[i for i in row if i not in (PAD_ID, EOS_ID)] for row in _cut_at_eos(out.tolist())]


def _cut_at_eos(rows: list[list[int]]) -> list[list[int]]:
    return [row[: row.index(EOS_ID)] if EOS_ID in row else row for row in rows]
