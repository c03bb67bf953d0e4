"""HTML views: every cell shows its exact value on hover, masked cells are grey, tokens are escaped."""
from __future__ import annotations

import numpy as np
import pytest
from plotly.colors import get_colorscale

from attnscope.viz.heatmap import COLORSCALE, MASKED_COLOR
from attnscope.viz.html import Scale, colours, heat_table, probability_bars, shaded_tokens
from tests.support import HtmlView


def test_colours_follow_the_heatmaps_scale_and_clip() -> None:
    stops = get_colorscale(COLORSCALE)
    first, last = (tuple(int(v) for v in c[4:-1].split(",")) for c in (stops[0][1], stops[-1][1]))

    def hexed(rgb: tuple[int, ...]) -> str:
        return "#" + "".join(f"{v:02x}" for v in rgb)

    got = colours(np.array([0.0, 0.5, 2.0, -1.0, np.nan]), zmax=0.5)
    assert list(got) == [hexed(first), hexed(last), hexed(last), hexed(first), hexed(first)]


def test_heat_table_cells_show_every_value_and_mask() -> None:
    rng = np.random.default_rng(0)
    z = rng.random((3, 4))
    masked = np.zeros((3, 4), dtype=bool)
    masked[0, 1:] = True
    markup = heat_table(z, ["r0", "r1", "<b>"], ["a", "b", "<eos>", "d"], title="T", scale=Scale(1.0), masked=masked)
    view = HtmlView(markup)
    cells = view.cells()
    assert view.title == "T" and len(cells) == 12
    for i, row in enumerate(["r0", "r1", "<b>"]):
        for j, col in enumerate(["a", "b", "<eos>", "d"]):
            assert cells[(row, col)] is None if masked[i, j] else cells[(row, col)] == pytest.approx(z[i, j], abs=5e-4)
    assert "<eos>" not in markup and "&lt;eos&gt;" in markup  # tokens are text, never markup
    assert markup.count(f"background:{MASKED_COLOR}") == 3


def test_views_refuse_labels_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match=r"\['p', 'q'\]"):
        heat_table(np.zeros((2, 3)), ["x", "y"], ["p", "q"], title="t", scale=Scale(1.0))
    with pytest.raises(ValueError, match="2-d"):
        heat_table(np.zeros(3), ["x"], ["p", "q", "r"], title="t", scale=Scale(1.0))


def test_shaded_tokens_and_bars() -> None:
    view = HtmlView(shaded_tokens(["a", "<b>"], np.array([0.25, 0.75]), title="S", scale=Scale(0.75, "‖a·f(x)‖")))
    assert view.hovers == ["0: a · ‖a·f(x)‖ 0.250", "1: <b> · ‖a·f(x)‖ 0.750"] and "<b>" in view.texts
    bars = probability_bars(["y", "x"], [0.6, 0.3], title="B", subtitle="p", highlight="y")
    assert HtmlView(bars).hovers == ["y: 0.600", "x: 0.300"]
    assert bars.index("crimson") < bars.index("steelblue")


def test_scale_is_fixed_or_the_values_own() -> None:
    assert Scale.of(np.array([0.2, np.nan]), "weight", 1.0).zmax == 1.0
    assert Scale.of(np.array([0.2, np.nan, 3.0]), "n", None).zmax == 3.0
    assert Scale.of(np.array([np.nan]), "n", None).zmax == 1.0
