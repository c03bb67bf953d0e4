"""All heads of all layers at once: one heatmap with blank gutters (fast to build and to draw)."""
from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from attnscope.records.attention import KIND_LABELS, AttentionRecord, Kind
from attnscope.viz.heatmap import COLORSCALE, MASKED_COLOR, TITLE_PX, causal_cells, is_long, title_layout
from attnscope.viz.labels import WEIGHT, check_labels

# Hover names the cell by its row (layer, query) and column (head, key): category axes carry one label per row and per
# column, where per-cell text would be a string for every cell (~3 MB of Python objects and 1.1 MB of page for a
# 34-token sentence, cached once per selected head).
GRID_HOVER = "%{{y}}<br>%{{x}}<br>{value} %{{z:.3f}}<extra></extra>"
MAX_CELL_SIDE = 48  # positions per axis drawn in one head's cell; longer inputs are averaged in blocks


def _blocks(n: int, factor: int) -> list[tuple[int, int]]:
    return [(i, min(i + factor, n)) for i in range(0, n, factor)]


def pooled(array: np.ndarray, factor: int) -> np.ndarray:
    """Average [..., Q, K] over factor x factor blocks of positions, ignoring masked (NaN) cells."""
    if factor == 1:
        return array
    *lead, n_q, n_k = array.shape
    pad_q, pad_k = -n_q % factor, -n_k % factor
    padded = np.pad(array, [(0, 0)] * len(lead) + [(0, pad_q), (0, pad_k)], constant_values=np.nan)
    blocks = padded.reshape(*lead, (n_q + pad_q) // factor, factor, (n_k + pad_k) // factor, factor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-masked blocks: NaN, as intended
        return np.nanmean(blocks, axis=(-3, -1))


def _names(tokens: Sequence[str], factor: int) -> list[str]:
    if factor == 1:
        return [f"{i}: {t}" for i, t in enumerate(tokens)]
    return [f"{a}–{b - 1}" for a, b in _blocks(len(tokens), factor)]  # positions only: keeps the page small


def _axis_labels(block: str, item: str, n_blocks: int, names: Sequence[str]) -> list[str]:
    """One category per row (or column) of the grid: "layer 1 · query 3: dog", with a distinct blank name for the
    gutter after each block (category names must differ; gutters are never hovered or ticked)."""
    labels: list[str] = []
    for b in range(n_blocks):
        labels += [f"{block} {b} · {item} {name}" for name in names]
        if b < n_blocks - 1:
            labels.append("\u200b" * (b + 1))
    return labels


PER_HEAD_TITLE = "share of<br>its head's<br>maximum"  # per-head colours: each head divided by its largest value


def heads_grid(record: AttentionRecord, kind: Kind, *, per_head_scale: bool | None = False,
               row_labels: Sequence[str] | None = None, selected: tuple[int, int | None] | None = None,
               value: str = WEIGHT, title_note: str = "") -> go.Figure:
    """Layers as rows, heads as columns, each cell one head's [query, key] map.

    With `per_head_scale`, each head is divided by its own maximum so faint heads stay visible
    (None: only for long inputs). Inputs longer than MAX_CELL_SIDE are drawn as averages over
    blocks of positions (the title says so): every weight is still computed, fewer are drawn.
    `selected` (layer, head) is outlined. `value` names the numbers on the colour bar and hover: anything but
    weights has no fixed 0-1 range (`title_note` says what they are after the title).
    """
    array = record.array(kind).astype(np.float32)  # (L, H, Q, K)
    n_layers, n_heads, n_q, n_k = array.shape
    queries, keys = record.axes(kind)
    rows_of = list(row_labels or queries)
    check_labels(n_q, rows_of, "queries")
    if per_head_scale is None:
        per_head_scale = is_long(max(n_q, n_k))
    if per_head_scale:
        peak = array.max(axis=(2, 3), keepdims=True)
        array = array / np.where(peak > 0, peak, 1)
    masked = causal_cells(kind, n_q, n_k)
    if masked is not None:
        array = np.where(masked, np.nan, array)
    factor = math.ceil(max(n_q, n_k) / MAX_CELL_SIDE)
    array = pooled(array, factor)
    masked = None if masked is None else pooled(np.where(masked, np.nan, 0.0), factor)  # NaN where fully masked
    q_names, k_names = _names(rows_of, factor), _names(keys, factor)
    n_q, n_k = len(q_names), len(k_names)
    height, width = n_layers * (n_q + 1) - 1, n_heads * (n_k + 1) - 1
    z = np.full((height, width), np.nan, dtype=np.float32)
    hidden = np.full((height, width), np.nan, dtype=np.float32)  # 1 where the causal mask forbids the cell
    for layer in range(n_layers):
        for head in range(n_heads):
            r, c = layer * (n_q + 1), head * (n_k + 1)
            z[r:r + n_q, c:c + n_k] = array[layer, head]
            if masked is not None:
                hidden[r:r + n_q, c:c + n_k] = np.where(np.isnan(masked), 1.0, np.nan)
    x = _axis_labels("head", "key", n_heads, k_names)
    y = _axis_labels("layer", "query", n_layers, q_names)
    bounded = value == WEIGHT
    fig = go.Figure(go.Heatmap(z=z, x=x, y=y, hovertemplate=GRID_HOVER.format(value=value), hoverongaps=False,
                               colorscale=COLORSCALE, zmin=0 if bounded else None, zmax=1 if bounded else None,
                               colorbar=dict(title=PER_HEAD_TITLE if per_head_scale else value, thickness=12)))
    if masked is not None:  # grey exactly on the masked cells (NaN in z); gutters stay white
        fig.add_trace(go.Heatmap(z=hidden, x=x, y=y, colorscale=[[0, MASKED_COLOR], [1, MASKED_COLOR]], showscale=False,
                                 hoverinfo="skip"))
    fig.update_xaxes(type="category", tickvals=[h * (n_k + 1) + (n_k - 1) / 2 for h in range(n_heads)],
                     ticktext=[f"head {h}" for h in range(n_heads)], side="top", showgrid=False, zeroline=False)
    fig.update_yaxes(type="category", tickvals=[i * (n_q + 1) + (n_q - 1) / 2 for i in range(n_layers)],
                     ticktext=[f"layer {i}" for i in range(n_layers)], autorange="reversed", showgrid=False, zeroline=False)
    if selected is not None:
        layer, head = selected
        c0, c1 = (0, width) if head is None else (head * (n_k + 1), head * (n_k + 1) + n_k)
        fig.add_shape(type="rect", x0=c0 - 0.5, x1=c1 - 0.5, y0=layer * (n_q + 1) - 0.5, y1=layer * (n_q + 1) + n_q - 0.5,
                      line=dict(color="crimson", width=2))
    notes = ["grey: masked (future) positions"] if masked is not None else []
    if factor > 1:
        notes.append(f"each cell averages {factor}×{factor} positions")
    title = (f"{KIND_LABELS[kind]} · every layer and head" + (f" ({'; '.join(notes)})" if notes else "")
             + (f" · {title_note}" if title_note else ""))
    fig.update_layout(title=title_layout(title), plot_bgcolor="white",
                      height=min(1100, 140 + n_layers * max(110, 9 * n_q)), margin=dict(l=10, r=10, t=TITLE_PX + 30, b=10))
    return fig
