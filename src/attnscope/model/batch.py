"""Id sequences padded into the [batch, length] tensors the model reads."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from attnscope.model.config import PAD_ID


def pad(seqs: Sequence[Sequence[int]]) -> Tensor:
    """Right-pad with <pad> to the longest sequence: [batch, longest]."""
    out = torch.full((len(seqs), max(len(s) for s in seqs)), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out
