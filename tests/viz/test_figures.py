"""Pure figure builders: token axes, exact data, masked cells, grids, steps, beams, positions."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.engine.beam_result import BeamNode, BeamResult
from attnscope.engine.record import DecodeStep
from attnscope.model.transformer import sinusoidal_table
from attnscope.viz.beam_tree import beam_tree
from attnscope.viz.grid import heads_grid
from attnscope.viz.heatmap import attention_heatmap, record_heatmap
from attnscope.viz.positional import encoding_curves, offset_profile, similarity_heatmap
from attnscope.viz.steps import shaded_tokens, step_rows, top_k_bars
from tests.record_fixtures import SRC, TGT, pattern_record


def test_heatmap_uses_integer_axes_labelled_with_tokens() -> None:
    r = pattern_record("uniform")
    fig = record_heatmap(r, "encoder", 1, 2)
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2, 3, 4] and list(fig.layout.xaxis.ticktext) == list(SRC)
    assert np.allclose(np.asarray(fig.data[0].z, dtype=float), r.pattern("encoder", 1, 2))
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0.0, 1.0)
    assert record_heatmap(r, "encoder", 1, 2, per_head_scale=True).data[0].zmax is None


def test_masked_future_cells_are_empty_not_zero() -> None:
    z = np.asarray(record_heatmap(pattern_record("uniform"), "decoder", 0, None).data[0].z, dtype=float)
    assert np.isnan(z[0, 1:]).all() and not np.isnan(np.tril(z)).any()


@pytest.mark.parametrize("build", [
    lambda: attention_heatmap(np.zeros((3, 3)), ["p", "q"], ["a", "b", "c"]),
    lambda: attention_heatmap(np.zeros((3, 2)), ["a", "b", "c"], ["p", "q", "r"]),
    lambda: record_heatmap(pattern_record(), "cross", 0, None, row_labels=["p", "q"]),
    lambda: heads_grid(pattern_record(), "cross", row_labels=["p", "q"]),
    lambda: step_rows(np.zeros((2, 3, 5)), ["p", "q"], title="t"),
    lambda: step_rows(np.zeros((2, 3, 3)), ["p", "q", "r", "s"], title="t", n_visible=2),
    lambda: shaded_tokens(["p", "q"], np.zeros(5), title="s"),
])
def test_label_mismatch_names_the_tokens(build) -> None:
    with pytest.raises(ValueError, match=r"\['p', 'q'"):
        build()


def test_grid_blocks_equal_each_head_and_gutters_are_empty() -> None:
    r = pattern_record("previous", layers=2, heads=3)
    fig = heads_grid(r, "encoder", selected=(1, 2))
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (2 * 6 - 1, 3 * 6 - 1)
    assert np.allclose(z[6:11, 12:17], r.pattern("encoder", 1, 2))
    assert np.isnan(z[5]).all() and np.isnan(z[:, 5]).all()
    assert len(fig.layout.shapes) == 1
    scaled = np.asarray(heads_grid(pattern_record("uniform"), "encoder", per_head_scale=True).data[0].z, dtype=float)
    assert np.nanmax(scaled[:5, :5]) == pytest.approx(1.0)


def step() -> DecodeStep:
    return DecodeStep(1, 7, "y", 0.6, (("y", 0.6), ("x", 0.3)), 0.9, (7, 6))


def test_step_figures() -> None:
    rows = step_rows(np.full((2, 3, 2), 0.5), TGT, title="t", n_visible=2)
    z = np.asarray(rows.data[0].z, dtype=float)
    assert z.shape == (2 * (3 + 1), 4) and np.isnan(z[:, 2:]).all()
    bars = top_k_bars(step())
    assert list(bars.data[0].marker.color) == ["crimson", "steelblue"]
    shaded = shaded_tokens(SRC, np.full(5, 0.2), title="s")
    assert list(shaded.data[0].text[0]) == list(SRC)


def test_beam_tree_highlights_the_chosen_path() -> None:
    nodes = [BeamNode(0, None, 0, 1, 0.0, "extended"), BeamNode(1, 0, 1, 5, -0.1, "extended"),
             BeamNode(2, 0, 1, 6, -0.5, "pruned"), BeamNode(3, 1, 2, 2, -0.2, "finished", -0.1)]
    fig = beam_tree(BeamResult([([5, 2], -0.1, -0.2)], nodes), str, highlight=3)
    names = {t.name for t in fig.data if t.name}
    assert names == {"extended", "pruned", "finished"}
    red = [t for t in fig.data if t.mode == "lines" and t.line.color == "crimson"]
    assert len(red) == 2


def test_positional_figures() -> None:
    table = sinusoidal_table(40, 16).numpy()
    assert np.allclose(np.asarray(similarity_heatmap(table, title="").data[0].z, dtype=float), table @ table.T, atol=1e-4)
    curves = offset_profile(table, [0, 10], title="")
    first, second = (np.asarray(t.y, dtype=float) for t in curves.data)
    assert np.allclose(first[:30], second[:30], atol=1e-4)  # depends only on the offset
    assert len(encoding_curves(table, [0, 1, 5], title="").data) == 3
