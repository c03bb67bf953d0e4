"""HTML views: every cell shows its exact value on hover, masked cells are grey, tokens are escaped."""
from __future__ import annotations

import numpy as np
from plotly.colors import get_colorscale

from attnscope.viz.heatmap import COLORSCALE
from attnscope.viz.html import Scale, colours


def test_colours_follow_the_heatmaps_scale_and_clip() -> None:
    stops = get_colorscale(COLORSCALE)
    first, last = (tuple(int(v) for v in c[4:-1].split(",")) for c in (stops[0][1], stops[-1][1]))

    def hexed(rgb: tuple[int, ...]) -> str:
        return "#" + "".join(f"{v:02x}" for v in rgb)

    got = colours(np.array([0.0, 0.5, 2.0, -1.0, np.nan]), zmax=0.5)
    assert list(got) == [hexed(first), hexed(last), hexed(last), hexed(first), hexed(first)]


def test_scale_is_fixed_or_the_values_own() -> None:
    assert Scale.of(np.array([0.2, np.nan]), "weight", 1.0).zmax == 1.0
    assert Scale.of(np.array([0.2, np.nan, 3.0]), "n", None).zmax == 3.0
    assert Scale.of(np.array([np.nan]), "n", None).zmax == 1.0
