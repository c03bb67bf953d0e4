"""Logit lens: what each decoder layer's output would predict if it were the last one.

Each captured decoder-layer output goes through the model's own final norm (if it has one) and
output layer; for the last layer that is exactly the model's prediction.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from attnscope.engine.recording.sharing import eval_mode, model_lock
from attnscope.model.transformer import Transformer
from attnscope.records.forward import ForwardTrace, LogitLens

CHUNK = 64  # positions whose logits are computed at once: the output layer is read once per chunk, not per position


@torch.no_grad()
def layer_logits(model: Transformer, trace: ForwardTrace, position: int) -> np.ndarray:
    """(L, V) logits of every decoder layer's output at `position`, through the final norm and output layer."""
    if not 0 <= position < trace.decoder_layers.shape[1]:
        raise ValueError(f"the target prefix has positions 0..{trace.decoder_layers.shape[1] - 1}; asked for {position}")
    hidden = torch.from_numpy(trace.decoder_layers[:, position]).to(next(model.parameters()).device)  # (L, D)
    with model_lock(model), eval_mode(model):
        return model.generator(model.decoder_norm(hidden)).float().cpu().numpy()


def logit_lens(model: Transformer, trace: ForwardTrace, position: int, chosen_id: int, k: int = 5) -> LogitLens:
    """Top-k per layer at `position` and where `chosen_id` (the token the model chose there) ranks."""
    logits = layer_logits(model, trace, position)
    shifted = logits - logits.max(-1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(-1, keepdims=True)  # (L, V)
    top = np.argsort(-probs, axis=-1, kind="stable")[:, :k]
    rank = 1 + (probs > probs[:, [chosen_id]]).sum(-1)
    return LogitLens(position, chosen_id, top, np.take_along_axis(probs, top, -1), rank, probs[:, chosen_id])


@torch.no_grad()
def logit_lenses(model: Transformer, trace: ForwardTrace, chosen_ids: Sequence[int], k: int = 5) -> list[LogitLens]:
    """The lens at every decoding step 0..len(chosen_ids)-1, each ranking the token chosen there: the same numbers as
    `logit_lens` at each position (to float32 rounding), computed CHUNK positions at a time."""
    n = len(chosen_ids)
    if not 0 < n <= trace.decoder_layers.shape[1]:
        raise ValueError(f"the target prefix has {trace.decoder_layers.shape[1]} positions; asked for {n} steps")
    device = next(model.parameters()).device
    out = []
    with model_lock(model), eval_mode(model):
        for start in range(0, n, CHUNK):
            hidden = torch.from_numpy(np.ascontiguousarray(trace.decoder_layers[:, start:start + CHUNK])).to(device)
            probs = model.generator(model.decoder_norm(hidden)).float().softmax(-1).transpose(0, 1)  # (c, L, V)
            chosen = torch.tensor(list(chosen_ids[start:start + CHUNK]), device=device)[:, None, None]
            chosen_prob = probs.gather(-1, chosen.expand(-1, probs.shape[1], 1))  # (c, L, 1)
            rank = 1 + (probs > chosen_prob).sum(-1)
            top_probs, top_ids = probs.topk(k, dim=-1)
            for i in range(probs.shape[0]):
                out.append(LogitLens(start + i, int(chosen_ids[start + i]), top_ids[i].cpu().numpy(),
                                     top_probs[i].cpu().numpy(), rank[i].cpu().numpy(), chosen_prob[i, :, 0].cpu().numpy()))
    return out
