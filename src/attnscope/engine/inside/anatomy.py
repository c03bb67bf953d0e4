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
    """What a stack's first layer reads, in words, as this config computes it (scale, positions and norm vary)."""
    scale = " × √d_model" if c.embed_scale else " (not scaled)"
    positions = " (no positions added: T5's are a bias on the scores)" if c.positional == "relative" else " + positions"
    return f"embeddings{scale}{positions}{f', then {norm_name(c)}' if c.embed_norm else ''}"


def norm_name(c: ModelConfig) -> str:
    return "RMSNorm" if c.layer_norm == "rms" else "LayerNorm"


NORMS = {"torch": "LayerNorm: (x − mean(x)) / √(var(x) + ε) × g + b",
         "annotated": "LayerNorm (the Annotated Transformer's): (x − mean(x)) / (std(x) + ε) × g + b, unbiased std",
         "rms": "RMSNorm: x / √(mean(x²) + ε) × g: no mean subtracted and no bias, a weight g only"}
ACTIVATION_NAMES = {"relu": "ReLU", "gelu": "GELU", "silu": "SiLU", "gelu_tanh": "GELU (tanh approximation)"}


def layer_parts(c: ModelConfig) -> list[dict[str, str]]:
    """What one layer's pieces compute as this config builds them, and the weights each learns (D = d_model)."""
    inner, bias = ("D" if c.d_head is None else "H·d_head"), ("" if c.qkv_bias else ", no biases")
    out = "W_O [D, " + inner + "]" + (" + b_O" if c.out_bias else ", no bias")
    act = ACTIVATION_NAMES[c.activation]
    ffn = (f"gated: (act(x·W_gate) ⊙ x·W_up)·W_down, act = {act} (Shazeer 2020)" if c.ffn == "gated"
           else f"act(x·W_1)·W_2, act = {act} (section 3.3)")
    ffn_weights = ("W_gate, W_up [D, d_ff], W_down [d_ff, D]" if c.ffn == "gated" else "W_1 [D, d_ff], W_2 [d_ff, D]")
    where = "before each sublayer: x + Sublayer(norm(x))" if c.norm == "pre" else "after each residual: norm(x + Sublayer(x))"
    rows = [("self-attention", f"softmax({scores_formula(c)}) V per head, heads concatenated, then W_O",
             f"W_Q, W_K, W_V [D, {inner}]{bias}; {out}"),
            ("cross-attention (decoder)", f"softmax({scores_formula(c, self_attention=False)}) V, keys and values from the "
             "encoder's output", f"W_Q, W_K, W_V [D, {inner}]{bias}; {out}"),
            ("feed-forward", ffn, ffn_weights + ("" if c.ffn_bias else ", no biases")),
            (f"norm, {where}", NORMS[c.layer_norm], "g [D]" + ("" if c.layer_norm == "rms" else ", b [D]"))]
    if c.positional == "relative":
        rows.append(("position bias (first layer of each stack)", "B[h, q, k] = table[bucket(k − q), h], added to every "
                     "layer's self-attention scores", f"table [{c.relative_buckets} buckets, H] per stack"))
    return [{"part": part, "computes": what, "learns": weights} for part, what, weights in rows]


def scores_formula(c: ModelConfig, self_attention: bool = True) -> str:
    """The scores as this config computes them: Q·Kᵀ/√d_head (the paper), unscaled (T5), + the position bias B."""
    scores = "Q·Kᵀ/√d_head" if c.scale_scores else "Q·Kᵀ (not scaled)"
    return scores + (" + position bias B" if self_attention and c.positional == "relative" else "")


def shape_walkthrough(model: Transformer, src_len: int, tgt_len: int) -> pd.DataFrame:
    """Tensor shapes at every stage for one sentence pair (batch of 1): B=1, S, T, D, H, d_head."""
    import pandas as pd

    c = model.config
    d, h, dh, s, t = c.d_model, c.n_heads, c.head_dim, src_len, tgt_len
    concat = ("[1, S, D]", d) if h * dh == d else ("[1, S, H·d_head]", h * dh)
    hidden = ", gated: act(x·W_gate) ⊙ x·W_up" if c.ffn == "gated" else ""
    rows = [
        ("source ids", "[1, S]", (1, s)),
        (f"source {input_formula(c)}", "[1, S, D]", (1, s, d)),
        ("encoder self-attn: Q, K, V per head", "[1, H, S, d_head]", (1, h, s, dh)),
        (f"encoder self-attn: scores {scores_formula(c)}", "[1, H, S, S]", (1, h, s, s)),
        ("encoder self-attn: weights (softmax)", "[1, H, S, S]", (1, h, s, s)),
        ("encoder self-attn: weights · V, heads concatenated", concat[0], (1, s, concat[1])),
        (f"encoder feed-forward hidden{hidden}", "[1, S, d_ff]", (1, s, c.d_ff)),
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
