"""Figures from plain plotly specs, built without plotly's per-property validation.

`go.Figure(go.Heatmap(...)).update_layout(...)` validates every property as it is set, which costs
10-20 ms a figure: most of a step click. A figure made from dicts with validation off costs ~1 ms;
tests/viz builds every such figure again with full validation, so a typo still fails a test.
"""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

_TEMPLATE = pio.templates[pio.templates.default].to_plotly_json()  # what a validated figure gets by default


def figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """A figure from trace dicts (each with its "type") and a layout dict, unvalidated (see module doc)."""
    return go.Figure({"data": data, "layout": {**layout, "template": _TEMPLATE}}, _validate=False)
