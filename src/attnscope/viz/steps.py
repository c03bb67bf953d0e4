"""Views of one decoding step: next-token probabilities, the source as the step saw it, its attention rows.

They redraw on every step click, so they are HTML (see viz/html.py), not plotly charts.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from attnscope.records.attention import DecodeStep, StepAttention
from attnscope.viz.html import Scale, heat_table, probability_bars, shaded_tokens
from attnscope.viz.labels import WEIGHT, check_labels


def top_k_bars(step: DecodeStep, k: int = 10) -> str:
    """Most probable next tokens at this step, the chosen one highlighted."""
    tokens = [t for t, _ in step.top_k[:k]]
    return probability_bars(tokens, [p for _, p in step.top_k[:k]], title=f"Step {step.index}: chose “{step.token}”",
                            subtitle=f"p = {step.prob:.2f} · entropy {step.entropy:.2f} nats", highlight=step.token)


def step_rows(rows: np.ndarray, keys: Sequence[str], *, title: str, n_visible: int | None = None,
              value: str = WEIGHT) -> str:
    """[L, H, K] attention rows of one step as one table: a row per (layer, head) plus each layer's mean.

    With `n_visible`, the rows cover only the first n_visible keys (the prefix a masked
    self-attention step sees); later keys (future positions) are greyed out. Weights share the
    0-1 scale; any other `value` (e.g. weighted value norms) is scaled to its own maximum.
    """
    n_layers, n_heads, n_k = rows.shape
    if n_visible is not None and not n_visible <= len(keys):
        raise ValueError(f"{n_visible} visible keys but only {len(keys)} labels: {list(keys)}")
    check_labels(n_k, list(keys)[:n_visible], "keys")
    blocks, labels, ends = [], [], []
    for layer in range(n_layers):
        for head in range(n_heads):
            blocks.append(rows[layer, head])
            labels.append(f"L{layer} H{head}")
        blocks.append(rows[layer].mean(0))
        labels.append(f"L{layer} mean")
        ends.append(len(labels) - 1)
    z = np.pad(np.stack(blocks).astype(np.float64), ((0, 0), (0, len(keys) - n_k)), constant_values=np.nan)
    masked = np.zeros(z.shape, dtype=bool)
    masked[:, n_k:] = True  # future positions: the causal mask forbids them
    scale = Scale.of(z, value, 1.0 if value == WEIGHT else None)
    return heat_table(z, labels, [f"{j}: {t}" for j, t in enumerate(keys)], title=title, scale=scale, masked=masked,
                      group_ends=ends)


def step_source(rows: StepAttention, layer: int, head: int | None, value: str = WEIGHT) -> str:
    """The source as one step saw it: one head's (or the mean of heads') cross-attention row, shaded
    up to the row's own maximum (a mean of heads is spread thin; on a 0-1 scale it would look blank)."""
    who = "mean of heads" if head is None else f"head {head}"
    w = rows.source_row(layer, head)
    return shaded_tokens(rows.source_tokens, w, scale=Scale.of(w, value, None),
                         title=f"Source as seen at step {rows.index} (cross-attention, layer {layer}, {who})")
