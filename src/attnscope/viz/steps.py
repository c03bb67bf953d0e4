"""Figures for one decoding step: next-token probabilities and the step's attention rows."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from attnscope.engine.record import DecodeStep
from attnscope.viz.heatmap import COLORSCALE, MASKED_COLOR
from attnscope.viz.labels import check_labels


def top_k_bars(step: DecodeStep, k: int = 10) -> go.Figure:
    """Most probable next tokens at this step, the chosen one highlighted."""
    tokens = [t for t, _ in step.top_k[:k]]
    probs = [p for _, p in step.top_k[:k]]
    colors = ["crimson" if t == step.token else "steelblue" for t in tokens]
    fig = go.Figure(go.Bar(x=probs, y=list(range(len(tokens))), orientation="h", marker_color=colors,
                           customdata=tokens, hovertemplate="%{customdata}: %{x:.3f}<extra></extra>",
                           text=[f"{p:.2f}" for p in probs], textposition="outside"))
    fig.update_yaxes(tickvals=list(range(len(tokens))), ticktext=tokens, autorange="reversed")
    fig.update_xaxes(range=[0, 1.1], title="probability")
    fig.update_layout(title=f"Step {step.index}: chose “{step.token}” (p={step.prob:.2f}, entropy {step.entropy:.2f} nats)",
                      height=120 + 26 * len(tokens), margin=dict(l=10, r=10, t=60, b=10))
    return fig


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
    fig = go.Figure(go.Heatmap(z=z, x=list(range(width)), y=list(range(len(labels))), customdata=custom,
                               hovertemplate="%{customdata}<br>weight %{z:.3f}<extra></extra>",
                               colorscale=COLORSCALE, zmin=0, zmax=1, xgap=1, ygap=1, colorbar=dict(thickness=12)))
    fig.update_xaxes(tickvals=list(range(width)), ticktext=list(keys), side="top", tickangle=-60)
    fig.update_yaxes(tickvals=list(range(len(labels))), ticktext=labels, autorange="reversed")
    fig.update_layout(title=title, plot_bgcolor=MASKED_COLOR, height=min(1000, 140 + 16 * len(labels)),
                      margin=dict(l=10, r=10, t=90, b=10))
    return fig


def shaded_tokens(tokens: Sequence[str], weights: np.ndarray, *, title: str) -> go.Figure:
    """The tokens in a row, each shaded by its weight (e.g. the source as seen by one step)."""
    w = np.asarray(weights, dtype=np.float32).reshape(1, -1)
    check_labels(w.shape[1], tokens, "tokens")
    fig = go.Figure(go.Heatmap(z=w, x=list(range(len(tokens))), y=[0], text=[list(tokens)], texttemplate="%{text}",
                               customdata=[[f"{t}: {v:.3f}" for t, v in zip(tokens, w[0])]],
                               hovertemplate="%{customdata}<extra></extra>", colorscale=COLORSCALE,
                               zmin=0, zmax=max(float(w.max()), 1e-9), showscale=False, xgap=2))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(title=title, height=130, margin=dict(l=10, r=10, t=40, b=10))
    return fig
