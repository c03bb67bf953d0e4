"""The model's anatomy: parameter counts per module, tensor shapes at every stage, raw encodings."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from attnscope.model.config import ModelConfig
from attnscope.model.transformer import Transformer

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd


def parameter_table(model: Transformer) -> pd.DataFrame:
    """Parameters per top-level part and per layer, tied matrices counted once (where first used)."""
    import pandas as pd

    seen: set[int] = set()
    rows = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            continue
        seen.add(id(p))
        parts = name.split(".")
        group = ".".join(parts[:2]) if parts[0] in ("encoder", "decoder") else parts[0]
        rows.append({"module": group, "parameters": p.numel()})
    frame = pd.DataFrame(rows)
    return frame.groupby("module", sort=False, as_index=False)["parameters"].sum()


def input_formula(c: ModelConfig) -> str:
    """What a stack's first layer reads, in words, as this config computes it (scale and LayerNorm vary by model)."""
    scale = " × √d_model" if c.embed_scale else " (not scaled)"
    return f"embeddings{scale} + positions{', then LayerNorm' if c.embed_norm else ''}"


def shape_walkthrough(model: Transformer, src_len: int, tgt_len: int) -> pd.DataFrame:
    """Tensor shapes at every stage for one sentence pair (batch of 1): B=1, S, T, D, H, d_head."""
    import pandas as pd

    c = model.config
    d, h, dh, s, t = c.d_model, c.n_heads, c.head_dim, src_len, tgt_len
    rows = [
        ("source ids", "[1, S]", (1, s)),
        (f"source {input_formula(c)}", "[1, S, D]", (1, s, d)),
        ("encoder self-attn: Q, K, V per head", "[1, H, S, d_head]", (1, h, s, dh)),
        ("encoder self-attn: scores Q·Kᵀ/√d_head", "[1, H, S, S]", (1, h, s, s)),
        ("encoder self-attn: weights (softmax)", "[1, H, S, S]", (1, h, s, s)),
        ("encoder self-attn: weights · V, heads concatenated", "[1, S, D]", (1, s, d)),
        ("encoder feed-forward hidden", "[1, S, d_ff]", (1, s, c.d_ff)),
        ("encoder output (memory)", "[1, S, D]", (1, s, d)),
        ("target ids (<bos> y1 …)", "[1, T]", (1, t)),
        ("decoder masked self-attn: weights", "[1, H, T, T]", (1, h, t, t)),
        ("cross-attn: Q from decoder, K/V from memory", "Q [1, H, T, d_head], K/V [1, H, S, d_head]", (1, h, t, dh)),
        ("cross-attn: weights", "[1, H, T, S]", (1, h, t, s)),
        ("decoder output", "[1, T, D]", (1, t, d)),
        ("logits over the target vocabulary", "[1, T, V]", (1, t, c.tgt_vocab_size)),
    ]
    return pd.DataFrame([{"stage": name, "shape": sym, "this sentence": "×".join(map(str, shape)),
                          "values": math.prod(shape)} for name, sym, shape in rows])


@torch.no_grad()
def model_positions(model: Transformer, n: int) -> np.ndarray:
    """The positional vectors the model adds at positions 0..n-1, (n, D)."""
    return model.positions(n).float().cpu().numpy()


@torch.no_grad()
def embedding_norms(model: Transformer, n: int) -> tuple[np.ndarray, np.ndarray]:
    """L2 norms of every target-token embedding, scaled as the model scales it, and of the first n positional vectors."""
    scale = math.sqrt(model.config.d_model) if model.config.embed_scale else 1.0
    tokens = (model.tgt_embed.weight[4:].float() * scale).norm(dim=-1).cpu().numpy()  # skip special tokens
    return tokens, np.linalg.norm(model_positions(model, n), axis=-1)
