"""Hand-made attention records with known patterns (exact expected numbers)."""
from __future__ import annotations

import numpy as np

from attnscope.records.attention import AttentionRecord

SRC = ("a", "b", "a", ".", "<eos>")
TGT = ("<bos>", "x", "y", "x")


def pattern_record(kind: str = "identity", layers: int = 2, heads: int = 3) -> AttentionRecord:
    """Encoder and decoder self-attention with one pattern; cross-attention uniform."""
    s, t = len(SRC), len(TGT)
    if kind == "identity":
        enc, dec = np.eye(s), np.eye(t)
    elif kind == "previous":
        enc = np.eye(s, k=-1)
        enc[0, 0] = 1
        dec = np.eye(t, k=-1)
        dec[0, 0] = 1
    else:  # uniform over allowed keys
        enc = np.full((s, s), 1 / s)
        dec = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]

    def tile(m: np.ndarray) -> np.ndarray:
        return np.tile(m, (layers, heads, 1, 1)).astype(np.float32)

    return AttentionRecord(SRC, TGT, tile(enc), tile(dec), tile(np.full((t, s), 1 / s)))
