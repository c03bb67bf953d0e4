"""Attention heatmaps: rows are queries, columns are keys, integer axes labelled with tokens."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from attnscope.engine.record import KIND_LABELS, AttentionRecord, Kind
from attnscope.viz.labels import check_labels

COLORSCALE = "Blues"
MASKED_COLOR = "#d9d9d9"  # cells a mask forbids (future positions) show as grey, not as 0
HOVER = "query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{z:.3f}<extra></extra>"


def head_weights(record: AttentionRecord, kind: Kind, layer: int, head: int | None) -> np.ndarray:
    """One head's [query, key] weights, or the mean over heads when `head` is None."""
    return record.mean_over_heads(kind, layer) if head is None else record.pattern(kind, layer, head)


def causal_cells(kind: Kind, n_queries: int, n_keys: int) -> np.ndarray | None:
    """Boolean [Q, K] mask of cells the model could not attend to, if the kind has any."""
    if kind != "decoder":
        return None
    return np.triu(np.ones((n_queries, n_keys), dtype=bool), k=1)


def attention_heatmap(weights: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], *,
                      title: str = "", masked: np.ndarray | None = None, per_head_scale: bool = False,
                      row_title: str = "query", col_title: str = "key", height: int | None = None) -> go.Figure:
    """A heatmap of [query, key] weights; masked cells are left empty on a grey background."""
    z = np.asarray(weights, dtype=np.float32).copy()
    if z.ndim != 2:
        raise ValueError(f"a heatmap needs [query, key] weights, got shape {list(z.shape)}")
    check_labels(z.shape[0], row_labels, "rows (queries)")
    check_labels(z.shape[1], col_labels, "columns (keys)")
    if masked is not None:
        z[masked] = np.nan
    rows = [f"{i}: {t}" for i, t in enumerate(row_labels)]
    cols = [f"{j}: {t}" for j, t in enumerate(col_labels)]
    custom = np.dstack(np.meshgrid(np.asarray(rows, dtype=object), np.asarray(cols, dtype=object), indexing="ij"))
    heat = go.Heatmap(z=z, x=list(range(len(cols))), y=list(range(len(rows))), customdata=custom,
                      colorscale=COLORSCALE, zmin=None if per_head_scale else 0.0,
                      zmax=None if per_head_scale else 1.0, hovertemplate=HOVER, xgap=1, ygap=1,
                      colorbar=dict(title="weight", thickness=12))
    fig = go.Figure(heat)
    side = max(len(rows), 4)
    fig.update_layout(title=title, plot_bgcolor=MASKED_COLOR, margin=dict(l=10, r=10, t=90, b=10),
                      height=height or min(900, 160 + 26 * side))
    fig.update_xaxes(tickvals=list(range(len(cols))), ticktext=list(col_labels), side="top", tickangle=-60,
                     title=col_title, showgrid=False, zeroline=False)
    fig.update_yaxes(tickvals=list(range(len(rows))), ticktext=list(row_labels), autorange="reversed",
                     title=row_title, showgrid=False, zeroline=False)
    return fig


def record_heatmap(record: AttentionRecord, kind: Kind, layer: int, head: int | None, *,
                   per_head_scale: bool = False, row_labels: Sequence[str] | None = None) -> go.Figure:
    """One head (or the mean of heads) of one layer of one kind of attention in `record`."""
    queries, keys = record.axes(kind)
    z = head_weights(record, kind, layer, head)
    who = "mean of heads" if head is None else f"head {head}"
    return attention_heatmap(z, row_labels or queries, keys, masked=causal_cells(kind, len(queries), len(keys)),
                             title=f"{KIND_LABELS[kind]} · layer {layer} · {who}", per_head_scale=per_head_scale,
                             row_title="query" if row_labels is None else "generated token (query)")
