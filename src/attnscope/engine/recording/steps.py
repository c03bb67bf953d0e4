"""The one way per-step attention becomes a sentence's rows.

A decoding loop with a KV cache computes one new query per step, over the keys it has so far; without a cache it
computes every query again. Either way the sentence's row t is the last query of step t, and keys a step did not
have yet are future positions: weight 0 (score -inf), as under the causal mask.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor


def join_steps(steps: Sequence[Tensor], fill: float = 0.0, last_query: bool = False) -> Tensor:
    """Attention of several steps (..., Q_t, K_t), joined along the queries into (..., ΣQ_t, K) with K the
    largest key count; the keys a step did not have are `fill` (0 for weights, -inf for scores).
    `last_query`: only each step's last query (a loop that ran the whole prefix again), (..., T, K)."""
    rows = [s[..., -1:, :] for s in steps] if last_query else list(steps)
    if len(rows) == 1:
        return rows[0]
    n_keys = max(r.shape[-1] for r in rows)
    return torch.cat([r if r.shape[-1] == n_keys else F.pad(r, (0, n_keys - r.shape[-1]), value=fill) for r in rows], -2)
