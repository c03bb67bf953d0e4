"""Figures for one decoding step: next-token probabilities and the step's attention rows."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from attnscope.engine.record import DecodeStep
from attnscope.viz.heatmap import COLORSCALE, MASKED_COLOR, thinned_ticks, title_layout


def top_k_bars(step: DecodeStep, k: int = 10) -> go.Figure:
    """Most probable next tokens at this step, the chosen one highlighted."""
    tokens = [t for t, _ in step.top_k[:k]]
    probs = [p for _, p in step.top_k[:k]]
    colors = ["crimson" if t == step.token else "steelblue" for t in tokens]
    fig = go.Figure(go.Bar(x=probs, y=list(range(len(tokens))), orientation="h", marker_color=colors,
                           customdata=tokens, hovertemplate="%{customdata}: %{x:.3f}<extra></extra>",
                           text=[f"{p:.2f}" for p in probs], textposition="outside"))
    fig.update_yaxes(tickvals=list(range(len(tokens))), ticktext=tokens, autorange="reversed")
    fig.update_xaxes(range=[0, 1.15], title="probability")
    title = f"Step {step.index}: chose “{step.token}”<br><sup>p = {step.prob:.2f} · entropy {step.entropy:.2f} nats</sup>"
    fig.update_layout(title=title_layout(title), height=150 + 26 * len(tokens), margin=dict(l=10, r=10, t=40, b=10))
    return fig


def step_rows(rows: np.ndarray, keys: Sequence[str], *, title: str, n_visible: int | None = None) -> go.Figure:
    """[L, H, K] attention rows of one step as one heatmap: a row per (layer, head) plus layer means.

    Keys at or after `n_visible` (future positions the causal mask hides) are greyed out.
    """
    n_layers, n_heads, n_k = rows.shape
    blocks, labels = [], []
    for layer in range(n_layers):
        for head in range(n_heads):
            blocks.append(rows[layer, head])
            labels.append(f"L{layer} H{head}")
        blocks.append(rows[layer].mean(0))
        labels.append(f"L{layer} mean")
    z = np.stack(blocks).astype(np.float32)
    width = len(keys)
    if z.shape[1] < width:
        z = np.pad(z, ((0, 0), (0, width - z.shape[1])), constant_values=np.nan)
    if n_visible is not None:
        z[:, n_visible:] = np.nan
    key_text = [f"{j}: {t}" for j, t in enumerate(keys)]
    custom = np.array([[f"{lab} → {kt}" for kt in key_text] for lab in labels], dtype=object)
    fig = go.Figure(go.Heatmap(z=z, x=list(range(width)), y=list(range(len(labels))), customdata=custom,
                               hovertemplate="%{customdata}<br>weight %{z:.3f}<extra></extra>",
                               colorscale=COLORSCALE, zmin=0, zmax=1, xgap=1 if width <= 80 else 0, ygap=1,
                               colorbar=dict(thickness=12)))
    ticks, text = thinned_ticks(keys)
    fig.update_xaxes(tickvals=ticks, ticktext=text, side="top", tickangle=-60, automargin=True)
    fig.update_yaxes(tickvals=list(range(len(labels))), ticktext=labels, autorange="reversed")
    fig.update_layout(title=title_layout(title), plot_bgcolor=MASKED_COLOR, height=min(1000, 200 + 16 * len(labels)),
                      margin=dict(l=10, r=10, t=30, b=10))
    return fig


def shaded_tokens(tokens: Sequence[str], weights: np.ndarray, *, title: str) -> go.Figure:
    """The tokens in a row, each shaded by its weight (e.g. the source as seen by one step)."""
    w = np.asarray(weights, dtype=np.float32).reshape(1, -1)
    fig = go.Figure(go.Heatmap(z=w, x=list(range(len(tokens))), y=[0], text=[list(tokens)], texttemplate="%{text}",
                               customdata=[[f"{t}: {v:.3f}" for t, v in zip(tokens, w[0])]],
                               hovertemplate="%{customdata}<extra></extra>", colorscale=COLORSCALE,
                               zmin=0, zmax=max(float(w.max()), 1e-9), showscale=False, xgap=2))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(title=title, height=130, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def step_source(tokens: Sequence[str], cross: np.ndarray, layer: int, head: int | None, t: int) -> go.Figure:
    """The source as step `t` saw it: [L, H, S] cross-attention rows, one head's (or the mean of heads') row."""
    row = cross[layer].mean(0) if head is None else cross[layer, head]
    who = "mean of heads" if head is None else f"head {head}"
    return shaded_tokens(tokens, row, title=f"Source as seen at step {t} (cross-attention, layer {layer}, {who})")
