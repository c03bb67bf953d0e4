"""Learning curves of a training run: losses on the left axis, scores in percent on the right."""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go


def learning_curves(steps: Sequence[int], losses: Sequence[float], eval_steps: Sequence[int],
                    val_losses: Sequence[float | None], bleu: Sequence[float | None],
                    exact: Sequence[float | None] = ()) -> go.Figure:
    """Smoothed training loss and validation loss (left axis, from 0) with validation BLEU and,
    for toy tasks, exact-match accuracy in percent (right axis, fixed 0-100 with round ticks).

    Both scores live on one 0-100 scale of their own, so plotly never aligns their ticks with
    the loss axis (which used to give ticks such as 1.858 or -0.673)."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=list(steps), y=list(losses), name="training loss (smoothed)", mode="lines"))
    fig.add_trace(go.Scatter(x=list(eval_steps), y=list(val_losses), name="validation loss", mode="lines+markers"))
    fig.add_trace(go.Scatter(x=list(eval_steps), y=list(bleu), name="validation BLEU", yaxis="y2", mode="lines+markers"))
    if any(e is not None for e in exact):
        fig.add_trace(go.Scatter(x=list(eval_steps), y=[None if e is None else 100 * e for e in exact],
                                 name="exact matches (%)", yaxis="y2", mode="lines+markers"))
    fig.update_layout(title="Learning curves", height=360, margin=dict(l=10, r=10, t=50, b=10),
                      legend=dict(orientation="h", y=-0.2),
                      xaxis=dict(title="step", rangemode="tozero"),
                      yaxis=dict(title="loss", rangemode="tozero"),
                      yaxis2=dict(title="BLEU / exact matches (%)", overlaying="y", side="right", range=[0, 100],
                                  tickmode="linear", tick0=0, dtick=20, showgrid=False))
    return fig
