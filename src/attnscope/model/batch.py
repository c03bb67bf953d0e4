"""Id sequences padded into the [batch, length] tensors the model reads."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor


def pad(seqs: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """Right-pad with <pad> (`pad_id`: the model config's) to the longest sequence: [batch, longest]."""
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out
