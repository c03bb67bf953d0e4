"""Server-drawn heatmaps of maps derived from attention (rollout, source alignment): rows are queries, columns are
keys, integer axes labelled with tokens. Recorded attention itself is drawn in the browser (viz/explorer.py)."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from attnscope.viz.labels import WEIGHT, check_labels

COLORSCALE = "Blues"
MASKED_COLOR = "#d9d9d9"  # cells a mask forbids (future positions) show as grey, not as 0
HOVER = "query %{{customdata[0]}}<br>key %{{customdata[1]}}<br>{value} %{{z:.3f}}<extra></extra>"
INDEX_HOVER = "query %{{y}}<br>key %{{x}}<br>{value} %{{z:.3f}}<extra></extra>"  # long maps: indices, tokens on the axes
LONG_INPUT = 40  # tokens: above this a 0-1 scale looks white (attention spreads thin), so colours scale per map
MAX_TICKS = 40  # tick labels per axis before they are thinned to every n-th token
MAX_HOVER_CELLS = 6_400  # above this, hover names positions by index (per-cell token text would dominate the page)
GAP_CELLS = 40  # tokens per axis above which cells are drawn without gaps (gaps would turn the map into a grey blob)


def is_long(n_tokens: int) -> bool:
    """Whether a map over `n_tokens` is scaled per head by default (see LONG_INPUT)."""
    return n_tokens > LONG_INPUT


def thinned_ticks(labels: Sequence[str], max_ticks: int = MAX_TICKS) -> tuple[list[int], list[str]]:
    """Tick positions and labels, every n-th one when there are more than `max_ticks` (they would overlap)."""
    every = max(1, math.ceil(len(labels) / max_ticks))
    positions = list(range(0, len(labels), every))
    return positions, [str(labels[i]) for i in positions]


TITLE_PX = 44  # room for a one- or two-line chart title at the very top of the figure


def title_layout(title: str) -> dict[str, object]:
    """A chart title pinned to the top left of the figure, above anything the top margin holds."""
    return dict(text=title, x=0, xanchor="left", xref="container", yref="container", y=1, yanchor="top",
                pad=dict(t=10, l=10), font=dict(size=15))


def top_margin(labels: Sequence[str], *, tickangle: float = 60, axis_title: bool = True) -> int:
    """Top margin for a title plus rotated tick labels (and an axis title) on the top axis, so none overlap."""
    longest = max((len(str(t)) for t in labels), default=1)
    label_px = 8 + 7 * longest * math.sin(math.radians(tickangle))
    return int(TITLE_PX + label_px + (24 if axis_title else 0))


def attention_heatmap(weights: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], *,
                      title: str = "", masked: np.ndarray | None = None, per_head_scale: bool | None = False,
                      row_title: str = "query", col_title: str = "key", height: int | None = None,
                      value: str = WEIGHT) -> go.Figure:
    """A heatmap of [query, key] weights; masked cells are left empty on a grey background.

    `per_head_scale=None` chooses: per-map colours for long inputs (`is_long`), 0-1 otherwise. `value` names what the
    cells hold on the colour bar and hover; anything but weights (e.g. weighted value norms) has no fixed 0-1 range.
    """
    z = np.asarray(weights, dtype=np.float32).copy()
    if z.ndim != 2:
        raise ValueError(f"a heatmap needs [query, key] weights, got shape {list(z.shape)}")
    check_labels(z.shape[0], row_labels, "rows (queries)")
    check_labels(z.shape[1], col_labels, "columns (keys)")
    if per_head_scale is None:
        per_head_scale = is_long(max(z.shape))
    if masked is not None:
        z[masked] = np.nan
    n_rows, n_cols = z.shape
    gap = 0 if max(n_rows, n_cols) > GAP_CELLS else 1
    fixed = value == WEIGHT and not per_head_scale
    scale_title = value if value != WEIGHT else WEIGHT if fixed else f"{WEIGHT}<br>(own scale)"
    heat = dict(z=z, x=list(range(n_cols)), y=list(range(n_rows)), colorscale=COLORSCALE, xgap=gap, ygap=gap,
                zmin=0.0 if fixed else None, zmax=1.0 if fixed else None, colorbar=dict(title=scale_title, thickness=12))
    if n_rows * n_cols <= MAX_HOVER_CELLS:
        rows = np.asarray([f"{i}: {t}" for i, t in enumerate(row_labels)], dtype=object)
        cols = np.asarray([f"{j}: {t}" for j, t in enumerate(col_labels)], dtype=object)
        heat.update(customdata=np.dstack(np.meshgrid(rows, cols, indexing="ij")), hovertemplate=HOVER.format(value=value))
    else:
        heat.update(hovertemplate=INDEX_HOVER.format(value=value))
    fig = go.Figure(go.Heatmap(**heat))
    x_ticks, x_text = thinned_ticks(col_labels)
    y_ticks, y_text = thinned_ticks(row_labels)
    top = top_margin(x_text)
    fig.update_layout(title=title_layout(title), plot_bgcolor=MASKED_COLOR, margin=dict(l=10, r=10, t=top, b=10),
                      height=height or min(900, top + 40 + 26 * max(n_rows, 4)))
    fig.update_xaxes(tickvals=x_ticks, ticktext=x_text, side="top", tickangle=-60, automargin=False,
                     title=dict(text=col_title, standoff=6), showgrid=False, zeroline=False)
    fig.update_yaxes(tickvals=y_ticks, ticktext=y_text, autorange="reversed", automargin=True,
                     title=row_title, showgrid=False, zeroline=False)
    return fig
