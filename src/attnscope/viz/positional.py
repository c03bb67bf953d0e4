"""Positional encodings: curves per dimension, position x dimension map, offset similarity, norms; T5's relative
position bias by offset."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go


def encoding_curves(table: np.ndarray, dims: Sequence[int], *, title: str) -> go.Figure:
    """Value of chosen dimensions over positions: each pair oscillates at its own frequency."""
    fig = go.Figure()
    for d in dims:
        fig.add_trace(go.Scatter(x=np.arange(table.shape[0]), y=table[:, d], mode="lines", name=f"dim {d}"))
    fig.update_layout(title=title, xaxis_title="position", yaxis_title="value", height=380,
                      margin=dict(l=10, r=10, t=50, b=10))
    return fig


def encoding_heatmap(table: np.ndarray, *, title: str) -> go.Figure:
    """Positions as rows, dimensions as columns."""
    fig = go.Figure(go.Heatmap(z=table.astype(np.float32), colorscale="RdBu", zmid=0,
                               hovertemplate="position %{y}<br>dimension %{x}<br>value %{z:.3f}<extra></extra>"))
    fig.update_yaxes(title="position", autorange="reversed")
    fig.update_xaxes(title="dimension")
    fig.update_layout(title=title, height=420, margin=dict(l=10, r=10, t=50, b=10))
    return fig


def similarity_heatmap(table: np.ndarray, *, title: str) -> go.Figure:
    """Dot products between the encodings of every pair of positions."""
    sim = (table @ table.T).astype(np.float32)
    fig = go.Figure(go.Heatmap(z=sim, colorscale="Viridis",
                               hovertemplate="positions %{y} · %{x}<br>dot product %{z:.2f}<extra></extra>"))
    fig.update_yaxes(title="position", autorange="reversed")
    fig.update_xaxes(title="position")
    fig.update_layout(title=title, height=420, margin=dict(l=10, r=10, t=50, b=10))
    return fig


def offset_profile(table: np.ndarray, anchors: Sequence[int], *, title: str) -> go.Figure:
    """Dot product of position p with p+k as a function of k, for several p: same curve = offset-only."""
    fig = go.Figure()
    n = table.shape[0]
    for p in anchors:
        offsets = np.arange(0, n - p)
        fig.add_trace(go.Scatter(x=offsets, y=table[p + offsets] @ table[p], mode="lines", name=f"from position {p}"))
    fig.update_layout(title=title, xaxis_title="offset k", yaxis_title="PE(p) · PE(p+k)", height=380,
                      margin=dict(l=10, r=10, t=50, b=10))
    return fig


def norms_histogram(token_norms: np.ndarray, position_norms: np.ndarray, *, title: str,
                    tokens: str = "token embedding × √d_model") -> go.Figure:
    """How large token embeddings (named `tokens`: scaled or not) are next to the positional encodings added to them."""
    fig = go.Figure()
    fig.add_trace(go.Histogram(x=token_norms, name=tokens, opacity=0.7))
    fig.add_trace(go.Histogram(x=position_norms, name="positional encoding", opacity=0.7))
    fig.update_layout(title=title, barmode="overlay", xaxis_title="L2 norm", yaxis_title="count", height=360,
                      margin=dict(l=10, r=10, t=50, b=10))
    return fig


def relative_bias_heatmap(offsets: np.ndarray, buckets: np.ndarray, bias: np.ndarray, *, title: str) -> go.Figure:
    """Heads as rows, offsets key − query as columns: what each head adds to a score (bias (H, N) at `offsets` (N,)),
    its bucket on hover (engine/inside/relative.py reads them off the model)."""
    fig = go.Figure(go.Heatmap(z=bias.astype(np.float32), x=offsets, y=[f"head {h}" for h in range(len(bias))],
                               customdata=np.broadcast_to(buckets, bias.shape),
                               colorscale="RdBu", zmid=0,
                               hovertemplate="%{y}<br>offset key − query %{x}<br>bucket %{customdata}<br>"
                                             "bias %{z:.4f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="offset key − query (negative: an earlier key)")
    fig.update_layout(title=title, height=max(220, 40 + 28 * len(bias)), margin=dict(l=10, r=10, t=50, b=10))
    return fig


def relative_bias_lines(offsets: np.ndarray, buckets: np.ndarray, bias: np.ndarray, *, title: str) -> go.Figure:
    """One line per head over the offsets: flat stretches are offsets that share a bucket."""
    fig = go.Figure()
    for h, row in enumerate(bias):
        fig.add_trace(go.Scatter(x=offsets, y=row, mode="lines+markers", name=f"head {h}", customdata=buckets,
                                 line_shape="hvh", hovertemplate="offset %{x}<br>bucket %{customdata}<br>"
                                                                 "bias %{y:.4f}<extra></extra>"))
    fig.update_layout(title=title, xaxis_title="offset key − query", yaxis_title="bias added to the score", height=360,
                      margin=dict(l=10, r=10, t=50, b=10))
    return fig
