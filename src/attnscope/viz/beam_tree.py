"""The beam search tree: the best hypotheses' paths by step, coloured by fate; the rest on request."""
from __future__ import annotations

from typing import Callable

import plotly.graph_objects as go

from attnscope.engine.beam_result import BeamResult
from attnscope.viz.heatmap import TITLE_PX, title_layout

STATUS_COLORS = {"extended": "steelblue", "pruned": "#bbbbbb", "finished": "seagreen"}
NODE_HOVER = "node %{customdata[0]}: %{customdata[3]}<br>log-prob %{customdata[1]:.3f}<br>score %{customdata[2]}<extra></extra>"


def hypothesis_nodes(result: BeamResult) -> list[int]:
    """The finished tree node of each hypothesis, in the hypotheses' (best first) order."""
    finished = [n for n in result.nodes if n.status == "finished"]
    found = []
    for ids, _, _ in result.hypotheses:
        found.append(next((n.id for n in finished if result.path(n.id) == ids), 0))
    return found


def _ancestry(result: BeamResult, node_id: int | None) -> set[int]:
    seen = set()
    while node_id is not None:
        seen.add(node_id)
        node_id = result.nodes[node_id].parent
    return seen


def beam_tree(result: BeamResult, piece: Callable[[int], str], highlight: int | None = None, *,
              top: int | None = None, show_pruned: bool = True) -> go.Figure:
    """Nodes at x = step, spread by cumulative log-probability rank; `highlight` marks one path in red.

    `top` keeps only the paths of the best `top` hypotheses (None: every hypothesis); without
    `show_pruned`, branches that left the beam are collapsed. Pruned nodes carry no text label.
    """
    ends = hypothesis_nodes(result)[:top]
    shown = set().union(*(_ancestry(result, e) for e in ends), _ancestry(result, highlight)) if ends else {0}
    if show_pruned:
        shown |= {n.id for n in result.nodes if n.status == "pruned" and n.parent in shown}
    nodes = [n for n in result.nodes if n.id in shown]
    by_step: dict[int, list[int]] = {}
    for node in nodes:
        by_step.setdefault(node.step, []).append(node.id)
    y = {}
    for ids in by_step.values():
        for rank, node_id in enumerate(sorted(ids, key=lambda i: -result.nodes[i].log_prob)):
            y[node_id] = -rank
    on_path = _ancestry(result, highlight)
    fig = go.Figure()
    for bold in (False, True):  # two line traces (grey, red): one per edge would be hundreds of traces
        xs: list[float | None] = []
        ys: list[float | None] = []
        for node in nodes:
            if node.parent is not None and (node.id in on_path) == bold:
                xs += [node.step - 1, node.step, None]
                ys += [y[node.parent], y[node.id], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color="crimson" if bold else "#cccccc", width=3 if bold else 1)))
    for status, color in STATUS_COLORS.items():
        group = [n for n in nodes if n.status == status]
        fig.add_trace(go.Scatter(
            x=[n.step for n in group], y=[y[n.id] for n in group], mode="markers+text", name=status,
            text=["" if status == "pruned" else piece(n.token_id) for n in group], textposition="top center",
            marker=dict(color=color, size=10, line=dict(color="crimson", width=[2 if n.id in on_path else 0 for n in group])),
            customdata=[[n.id, n.log_prob, "" if n.score is None else f"{n.score:.3f}", piece(n.token_id)] for n in group],
            hovertemplate=NODE_HOVER))
    hidden = len(result.nodes) - len(nodes)
    what = f"paths of the {len(ends)} best of {len(result.hypotheses)} hypotheses" if top else "every hypothesis"
    title = (f"Beam search tree: {what}" + (f", {hidden} of {len(result.nodes)} nodes collapsed" if hidden else "") +
             "<br><sup>green: finished · blue: kept in the beam · grey: pruned · red: chosen hypothesis</sup>")
    fig.update_xaxes(title="step", dtick=1)
    fig.update_yaxes(visible=False)
    rows = max((len(v) for v in by_step.values()), default=1)
    fig.update_layout(title=title_layout(title), height=min(900, 220 + 34 * rows), margin=dict(l=10, r=10, t=TITLE_PX + 16, b=10),
                      legend=dict(orientation="h"))
    return fig
