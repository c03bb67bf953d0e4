"""All heads of all layers at once: one heatmap with blank gutters (fast to build and to draw)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from attnscope.engine.record import KIND_LABELS, AttentionRecord, Kind
from attnscope.viz.heatmap import COLORSCALE, causal_cells
from attnscope.viz.labels import check_labels

GRID_HOVER = "%{customdata}<br>weight %{z:.3f}<extra></extra>"


def heads_grid(record: AttentionRecord, kind: Kind, *, per_head_scale: bool = False,
               row_labels: Sequence[str] | None = None, selected: tuple[int, int | None] | None = None) -> go.Figure:
    """Layers as rows, heads as columns, each cell one head's [query, key] map.

    With `per_head_scale`, each head is divided by its own maximum so faint heads stay visible.
    `selected` (layer, head) is outlined.
    """
    array = record.array(kind).astype(np.float32)  # (L, H, Q, K)
    n_layers, n_heads, n_q, n_k = array.shape
    queries, keys = record.axes(kind)
    rows_of = list(row_labels or queries)
    check_labels(n_q, rows_of, "queries")
    if per_head_scale:
        peak = array.max(axis=(2, 3), keepdims=True)
        array = array / np.where(peak > 0, peak, 1)
    masked = causal_cells(kind, n_q, n_k)
    if masked is not None:
        array = np.where(masked, np.nan, array)
    height, width = n_layers * (n_q + 1) - 1, n_heads * (n_k + 1) - 1
    z = np.full((height, width), np.nan, dtype=np.float32)
    text = np.full((height, width), "", dtype=object)
    qk = np.array([[f"query {q}: {rows_of[q]} → key {k}: {keys[k]}" for k in range(n_k)] for q in range(n_q)], dtype=object)
    for layer in range(n_layers):
        for head in range(n_heads):
            r, c = layer * (n_q + 1), head * (n_k + 1)
            z[r:r + n_q, c:c + n_k] = array[layer, head]
            text[r:r + n_q, c:c + n_k] = f"layer {layer} head {head}<br>" + qk
    scale = "÷ head max" if per_head_scale else "weight"
    fig = go.Figure(go.Heatmap(z=z, customdata=text, hovertemplate=GRID_HOVER, colorscale=COLORSCALE,
                               zmin=0, zmax=1, colorbar=dict(title=scale, thickness=12)))
    fig.update_xaxes(tickvals=[h * (n_k + 1) + (n_k - 1) / 2 for h in range(n_heads)],
                     ticktext=[f"head {h}" for h in range(n_heads)], side="top", showgrid=False, zeroline=False)
    fig.update_yaxes(tickvals=[layer * (n_q + 1) + (n_q - 1) / 2 for layer in range(n_layers)],
                     ticktext=[f"layer {layer}" for layer in range(n_layers)], autorange="reversed",
                     showgrid=False, zeroline=False)
    if selected is not None:
        layer, head = selected
        c0, c1 = (0, width) if head is None else (head * (n_k + 1), head * (n_k + 1) + n_k)
        fig.add_shape(type="rect", x0=c0 - 0.5, x1=c1 - 0.5, y0=layer * (n_q + 1) - 0.5, y1=layer * (n_q + 1) + n_q - 0.5,
                      line=dict(color="crimson", width=2))
    fig.update_layout(title=f"{KIND_LABELS[kind]} · every layer and head", plot_bgcolor="white",
                      height=min(1100, 140 + n_layers * max(110, 9 * n_q)), margin=dict(l=10, r=10, t=80, b=10))
    fig.add_annotation(text="grey: masked (future) positions" if masked is not None else "", showarrow=False,
                       xref="paper", yref="paper", x=1, y=-0.02, font=dict(color="#777", size=11))
    return fig
