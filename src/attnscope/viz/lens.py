"""Logit lens figure: each decoder layer's best guesses for the next token, and where the final choice ranks."""
from __future__ import annotations

from typing import Callable

import numpy as np
import plotly.graph_objects as go

from attnscope.engine.trace_data import LogitLens
from attnscope.viz.titles import lines, wrap


def lens_heatmap(lens: LogitLens, piece: Callable[[int], str]) -> go.Figure:
    """Rows: decoder layers (the last is the model's real prediction); columns: top-k; colour: probability."""
    n_layers, k = lens.top_ids.shape
    chosen = piece(lens.chosen_id)
    text = np.asarray([[piece(int(i)) for i in row] for row in lens.top_ids], dtype=object)
    rows = [f"layer {layer}{' (output)' if layer == n_layers - 1 else ''} · “{chosen}” rank {int(r)}, p={p:.3f}"
            for layer, (r, p) in enumerate(zip(lens.chosen_rank, lens.chosen_prob))]
    border = np.where(lens.top_ids == lens.chosen_id, "◆ ", "")
    fig = go.Figure(go.Heatmap(z=lens.top_probs.astype(np.float32), x=list(range(k)), y=list(range(n_layers)),
                               text=border + text, texttemplate="%{text}", zmin=0, zmax=1, colorscale="Blues",
                               customdata=text, xgap=2, ygap=2, colorbar=dict(title="p", thickness=10),
                               hovertemplate="%{customdata}<br>probability %{z:.4f}<extra></extra>"))
    fig.update_xaxes(tickvals=list(range(k)), ticktext=[f"#{i + 1}" for i in range(k)], side="top", showgrid=False)
    fig.update_yaxes(tickvals=list(range(n_layers)), ticktext=rows, showgrid=False)
    title = wrap(f"Logit lens at step {lens.position}: each layer's output through the final norm and the output layer "
                 f"(softmax(LayerNorm(h)·W_out)); ◆ = “{chosen}”, the token chosen")
    return fig.update_layout(title=title, height=120 + 20 * lines(title) + 40 * n_layers,
                             margin=dict(l=10, r=10, t=70 + 20 * lines(title), b=10))
