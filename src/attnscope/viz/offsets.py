"""Figures for section 3.5's claim that an offset is a linear map: rotations per frequency pair, and fit errors."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from attnscope.engine.inside.offsets import RotationCheck
from attnscope.viz.titles import HALF, wrap

MARGIN = dict(l=10, r=10, t=70, b=10)
# Log axes label their ticks 1e-06, 1e-05 ... (plotly's default writes SI prefixes: "1µ", "100n")
LOG_AXIS = dict(type="log", exponentformat="e", showexponent="all")


def rotation_circle(check: RotationCheck, pair: int, n_arrows: int = 8) -> go.Figure:
    """One frequency pair (PE(t, 2i), PE(t, 2i+1), or i and i + D/2 in [sin | cos] halves) over positions:
    rotating PE(t) by ω_i·k lands on PE(t+k)."""
    if not 0 <= pair < check.frequencies.size:
        raise ValueError(f"frequency pair must be between 0 and {check.frequencies.size - 1}, got {pair}")
    columns = [2 * pair, 2 * pair + 1]  # the check's tables are in (sin, cos) pairs
    dims = check.dimensions(pair)  # the model's own
    before, predicted, actual = (a[:, columns] for a in (check.before, check.predicted, check.actual))
    t = np.arange(len(before))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=before[:, 0], y=before[:, 1], mode="markers", name="PE(t)", customdata=t,
                             marker=dict(color="#999", size=6),
                             hovertemplate="PE(%{customdata}) = (%{x:.5f}, %{y:.5f})<extra></extra>"))
    fig.add_trace(go.Scatter(x=actual[:, 0], y=actual[:, 1], mode="markers", name="PE(t+k) from the table",
                             customdata=t + check.offset,
                             marker=dict(symbol="circle-open", size=12, color="steelblue"),
                             hovertemplate="PE(%{customdata}) = (%{x:.5f}, %{y:.5f})<extra></extra>"))
    err = np.abs(predicted - actual).max(-1)
    fig.add_trace(go.Scatter(x=predicted[:, 0], y=predicted[:, 1], mode="markers", name="R(ω·k)·PE(t)",
                             customdata=np.c_[t, err],
                             marker=dict(symbol="x", size=7, color="crimson"),
                             hovertemplate="rotated PE(%{customdata[0]}) = (%{x:.5f}, %{y:.5f})<br>|error| %{customdata[1]:.1e}"
                                           "<extra></extra>"))
    for i in np.linspace(0, len(t) - 1, min(n_arrows, len(t))).astype(int):
        fig.add_annotation(x=predicted[i, 0], y=predicted[i, 1], ax=before[i, 0], ay=before[i, 1], xref="x", yref="y",
                           axref="x", ayref="y", showarrow=True, arrowhead=2, arrowcolor="crimson", opacity=0.5)
    angle = check.frequencies[pair] * check.offset
    fig.update_xaxes(title=f"PE(t, {dims[0]}) = sin(ω t)", range=[-1.2, 1.2])
    fig.update_yaxes(title=f"PE(t, {dims[1]}) = cos(ω t)", range=[-1.2, 1.2], scaleanchor="x")
    return fig.update_layout(
        title=wrap(f"Section 3.5: PE(t+{check.offset}) = R·PE(t), pair {pair}: ω = {check.frequencies[pair]:.5f}, "
                   f"a turn of {angle:.4f} rad; max error {float(check.pair_errors[pair]):.1e}", HALF),
        height=520, margin=dict(MARGIN, t=90))


def rotation_errors(check: RotationCheck) -> go.Figure:
    """Largest |R·PE(t) − PE(t+k)| of each frequency pair: float32 rounding, nothing more."""
    pairs = np.arange(check.frequencies.size)
    fig = go.Figure(go.Bar(x=pairs, y=np.maximum(check.pair_errors, 1e-12), customdata=check.frequencies,
                           hovertemplate="pair %{x} (ω = %{customdata:.5f})<br>max error %{y:.2e}<extra></extra>"))
    fig.update_yaxes(title="max |error|", **LOG_AXIS)
    first, second = ("2i", "2i+1") if check.layout == "interleaved" else ("i", f"i+{check.frequencies.size}")
    fig.update_xaxes(title=f"frequency pair i (dimensions {first}, {second})")
    title = f"Rotation check over every pair, offset {check.offset}: max error {check.max_error:.1e}"
    return fig.update_layout(title=wrap(title, HALF),
                             height=340, margin=dict(MARGIN, t=90))


def offset_fit_curves(offsets: Sequence[int], errors: Mapping[str, np.ndarray]) -> go.Figure:
    """Relative error of the best orthogonal map PE(t) → PE(t+k) for each offset k, one curve per table."""
    fig = go.Figure()
    for name, values in errors.items():
        fig.add_trace(go.Scatter(x=list(offsets), y=values, mode="lines+markers", name=name,
                                 hovertemplate="offset %{x}<br>relative error %{y:.2e}<extra></extra>"))
    fig.update_xaxes(title="offset k")
    fig.update_yaxes(title="‖R·PE(t) − PE(t+k)‖ / ‖PE(t+k)‖", **LOG_AXIS)
    return fig.update_layout(title="How far is an offset a rotation? Best orthogonal map by least squares (0 = exactly)",
                             height=380, margin=MARGIN)
