"""The beam search tree: hypotheses by step, lines to their parents, coloured by fate."""
from __future__ import annotations

from typing import Callable

import plotly.graph_objects as go

from attnscope.engine.beam_result import BeamResult

STATUS_COLORS = {"extended": "steelblue", "pruned": "#bbbbbb", "finished": "seagreen"}
NODE_HOVER = "node %{customdata[0]}: %{text}<br>log-prob %{customdata[1]:.3f}<br>score %{customdata[2]}<extra></extra>"


def beam_tree(result: BeamResult, piece: Callable[[int], str], highlight: int | None = None) -> go.Figure:
    """Nodes at x = step, spread by cumulative log-probability rank; `highlight` marks one path."""
    by_step: dict[int, list[int]] = {}
    for node in result.nodes:
        by_step.setdefault(node.step, []).append(node.id)
    y = {}
    for ids in by_step.values():
        for rank, node_id in enumerate(sorted(ids, key=lambda i: -result.nodes[i].log_prob)):
            y[node_id] = -rank
    on_path = set()
    node_id = highlight
    while node_id is not None:
        on_path.add(node_id)
        node_id = result.nodes[node_id].parent
    fig = go.Figure()
    for node in result.nodes:
        if node.parent is not None:
            bold = node.id in on_path
            fig.add_trace(go.Scatter(x=[node.step - 1, node.step], y=[y[node.parent], y[node.id]], mode="lines",
                                     line=dict(color="crimson" if bold else "#cccccc", width=3 if bold else 1),
                                     hoverinfo="skip", showlegend=False))
    for status, color in STATUS_COLORS.items():
        nodes = [n for n in result.nodes if n.status == status]
        fig.add_trace(go.Scatter(
            x=[n.step for n in nodes], y=[y[n.id] for n in nodes], mode="markers+text", name=status,
            text=[piece(n.token_id) for n in nodes], textposition="top center",
            marker=dict(color=color, size=10, line=dict(color="crimson", width=[2 if n.id in on_path else 0 for n in nodes])),
            customdata=[[n.id, n.log_prob, "" if n.score is None else f"{n.score:.3f}"] for n in nodes],
            hovertemplate=NODE_HOVER))
    fig.update_xaxes(title="step", dtick=1)
    fig.update_yaxes(visible=False)
    fig.update_layout(title="Beam search tree (green: finished, grey: pruned; red: chosen hypothesis)",
                      height=420, margin=dict(l=10, r=10, t=60, b=10), legend=dict(orientation="h"))
    return fig
