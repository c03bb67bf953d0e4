"""The beam search tree: the best hypotheses' paths by step, coloured by fate; the rest on request."""
from __future__ import annotations

from typing import Callable

import plotly.graph_objects as go

from attnscope.engine.decoding.beam_result import BeamResult
from attnscope.viz.heatmap import TITLE_PX, title_layout

STATUS_COLORS = {"extended": "steelblue", "pruned": "#bbbbbb", "finished": "seagreen", "stopped": "darkorange"}
NODE_HOVER = ("node %{customdata[0]}: %{customdata[3]}<br>log-probability of the path (sum) %{customdata[1]:.3f}"
              "<br>score (÷ length, finished or stopped only) %{customdata[2]}<extra></extra>")


def hypothesis_nodes(result: BeamResult) -> list[int]:
    """The finished (or, in a stopped search, stopped) tree node of each hypothesis, in the hypotheses' (best first)
    order."""
    finished = [n for n in result.nodes if n.status in ("finished", "stopped")]
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


ROW_PX = 30  # one decoding step per row: a label sits beside its node, never on another step's
LABEL_PX = 7.5  # about one character of a node label
PLOT_PX = 720  # the narrowest plot the Step page gives the tree (a 1280-px window, sidebar open)


def fit_label(label: str, room_px: float) -> str:
    """`label` cut to fit `room_px` (about LABEL_PX per character), ending in “…” when cut; hover shows it whole."""
    n = max(2, int(room_px // LABEL_PX))
    return label if len(label) <= n else label[: n - 1] + "…"


def beam_tree(result: BeamResult, piece: Callable[[int], str], highlight: int | None = None, *,
              top: int | None = None, show_pruned: bool = True) -> go.Figure:
    """Steps run down the figure, one row each (the figure grows with the output, so labels never crowd);
    the nodes of a step spread across by cumulative log-probability rank, best on the left, each
    token written to the right of its node and cut with “…” only when the columns are too narrow.
    `highlight` marks one path in red.

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
    x = {}
    for ids in by_step.values():
        for rank, node_id in enumerate(sorted(ids, key=lambda i: -result.nodes[i].log_prob)):
            x[node_id] = rank
    columns = max(x.values(), default=0) + 1
    room = 0.9 * PLOT_PX / (columns + 0.2) - 12  # a column's width less its marker
    on_path = _ancestry(result, highlight)
    fig = go.Figure()
    for bold in (False, True):  # two line traces (grey, red): one per edge would be hundreds of traces
        xs: list[float | None] = []
        ys: list[float | None] = []
        for node in nodes:
            if node.parent is not None and (node.id in on_path) == bold:  # an elbow between the rows of labels
                xs += [x[node.parent], x[node.parent], x[node.id], x[node.id], None]
                ys += [node.step - 1, node.step - 0.5, node.step - 0.5, node.step, None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line=dict(color="crimson" if bold else "#cccccc", width=3 if bold else 1)))
    for status, color in STATUS_COLORS.items():
        group = [n for n in nodes if n.status == status]
        if status == "stopped" and not group:  # only a stopped search has them: no empty legend entry
            continue
        fig.add_trace(go.Scatter(
            x=[x[n.id] for n in group], y=[n.step for n in group], mode="markers+text", name=status,
            text=["" if status == "pruned" else fit_label(piece(n.token_id), room) for n in group],
            textposition="middle right", cliponaxis=False,
            marker=dict(color=color, size=10, line=dict(color="crimson", width=[2 if n.id in on_path else 0 for n in group])),
            customdata=[[n.id, n.log_prob, "" if n.score is None else f"{n.score:.3f}", piece(n.token_id)] for n in group],
            hovertemplate=NODE_HOVER))
    hidden = len(result.nodes) - len(nodes)
    what = f"paths of the {len(ends)} best of {len(result.hypotheses)} hypotheses" if top else "every hypothesis"
    title = (f"Beam search tree: {what}" + (f", {hidden} of {len(result.nodes)} nodes collapsed" if hidden else "") +
             "<br><sup>green: finished · blue: kept in the beam · grey: pruned · "
             + ("orange: in the beam when the search was stopped · " * any(n.status == "stopped" for n in nodes))
             + "red: chosen hypothesis · best on the left</sup>")
    steps = max(by_step, default=0)
    fig.update_yaxes(title="step", dtick=1, range=[steps + 0.6, -0.6], zeroline=False)  # step 0 on top
    fig.update_xaxes(visible=False, range=[-0.3, columns - 0.1])
    heading = {**title_layout(title), "pad": dict(t=16, l=10)}  # room for the title's <sup> line: drawn whole
    return fig.update_layout(title=heading, height=TITLE_PX + 66 + ROW_PX * (steps + 1),
                             margin=dict(l=10, r=10, t=TITLE_PX + 22, b=10),
                             legend=dict(orientation="h", y=-0.02, yanchor="top"))
