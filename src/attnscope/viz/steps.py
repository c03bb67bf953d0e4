"""Figures for one decoding step: next-token probabilities and the step's attention rows."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale

from attnscope.engine.record import DecodeStep, StepAttention
from attnscope.viz.heatmap import COLORSCALE, MASKED_COLOR, TITLE_PX, thinned_ticks, title_layout, top_margin
from attnscope.viz.labels import check_labels
from attnscope.viz.spec import figure

SCALE = get_colorscale(COLORSCALE)  # resolved here: unvalidated specs reach plotly.js as written


def top_k_bars(step: DecodeStep, k: int = 10) -> go.Figure:
    """Most probable next tokens at this step, the chosen one highlighted."""
    tokens = [t for t, _ in step.top_k[:k]]
    probs = [p for _, p in step.top_k[:k]]
    positions = list(range(len(tokens)))
    bars = dict(type="bar", x=probs, y=positions, orientation="h",
                marker=dict(color=["crimson" if t == step.token else "steelblue" for t in tokens]),
                customdata=tokens, hovertemplate="%{customdata}: %{x:.3f}<extra></extra>",
                text=[f"{p:.2f}" for p in probs], textposition="outside")
    title = f"Step {step.index}: chose “{step.token}”<br><sup>p = {step.prob:.2f} · entropy {step.entropy:.2f} nats</sup>"
    return figure([bars], dict(
        title=title_layout(title), height=130 + 26 * len(tokens), margin=dict(l=10, r=10, t=TITLE_PX + 16, b=10),
        yaxis=dict(tickvals=positions, ticktext=tokens, autorange="reversed"),
        xaxis=dict(range=[0, 1.15], title=dict(text="probability"))))


def step_rows(rows: np.ndarray, keys: Sequence[str], *, title: str, n_visible: int | None = None) -> go.Figure:
    """[L, H, K] attention rows of one step as one heatmap: a row per (layer, head) plus layer means.

    With `n_visible`, the rows cover only the first n_visible keys (the prefix a masked
    self-attention step sees); later keys (future positions) are greyed out.
    """
    n_layers, n_heads, n_k = rows.shape
    if n_visible is not None and not n_visible <= len(keys):
        raise ValueError(f"{n_visible} visible keys but only {len(keys)} labels: {list(keys)}")
    check_labels(n_k, list(keys)[:n_visible], "keys")
    blocks, labels = [], []
    for layer in range(n_layers):
        for head in range(n_heads):
            blocks.append(rows[layer, head])
            labels.append(f"L{layer} H{head}")
        blocks.append(rows[layer].mean(0))
        labels.append(f"L{layer} mean")
    z = np.stack(blocks).astype(np.float32)
    width = len(keys)
    z = np.pad(z, ((0, 0), (0, width - n_k)), constant_values=np.nan)  # future keys: empty
    key_text = [f"{j}: {t}" for j, t in enumerate(keys)]
    custom = np.array([[f"{lab} → {kt}" for kt in key_text] for lab in labels], dtype=object)
    heat = dict(type="heatmap", z=z, x=list(range(width)), y=list(range(len(labels))), customdata=custom,
                hovertemplate="%{customdata}<br>weight %{z:.3f}<extra></extra>", colorscale=SCALE,
                zmin=0, zmax=1, xgap=1 if width <= 80 else 0, ygap=1, colorbar=dict(thickness=12))
    ticks, text = thinned_ticks(keys)
    top = top_margin(text, axis_title=False)
    return figure([heat], dict(
        title=title_layout(title), plot_bgcolor=MASKED_COLOR, height=min(1000, top + 40 + 16 * len(labels)),
        margin=dict(l=10, r=10, t=top, b=10),
        xaxis=dict(tickvals=ticks, ticktext=text, side="top", tickangle=-60, automargin=False),
        yaxis=dict(tickvals=list(range(len(labels))), ticktext=labels, autorange="reversed")))


def shaded_tokens(tokens: Sequence[str], weights: np.ndarray, *, title: str) -> go.Figure:
    """The tokens in a row, each shaded by its weight (e.g. the source as seen by one step)."""
    w = np.asarray(weights, dtype=np.float32).reshape(1, -1)
    check_labels(w.shape[1], tokens, "tokens")
    heat = dict(type="heatmap", z=w, x=list(range(len(tokens))), y=[0], text=[list(tokens)], texttemplate="%{text}",
                customdata=[[f"{t}: {v:.3f}" for t, v in zip(tokens, w[0])]], hovertemplate="%{customdata}<extra></extra>",
                colorscale=SCALE, zmin=0, zmax=max(float(w.max()), 1e-9), showscale=False, xgap=2)
    return figure([heat], dict(title=title_layout(title), height=130, margin=dict(l=10, r=10, t=TITLE_PX, b=10),
                               xaxis=dict(visible=False), yaxis=dict(visible=False)))


def step_source(rows: StepAttention, layer: int, head: int | None) -> go.Figure:
    """The source as one step saw it: one head's (or the mean of heads') cross-attention row."""
    who = "mean of heads" if head is None else f"head {head}"
    return shaded_tokens(rows.source_tokens, rows.source_row(layer, head),
                         title=f"Source as seen at step {rows.index} (cross-attention, layer {layer}, {who})")
