"""Pure figure builders: token axes, exact data, masked cells, grids, steps, beams, positions."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from attnscope.engine.decoding.beam_result import BeamNode, BeamResult
from attnscope.model.positions import sinusoidal_table
from attnscope.viz.beam_tree import beam_tree, hypothesis_nodes
from attnscope.viz.heatmap import MAX_TICKS, TITLE_PX, attention_heatmap, thinned_ticks
from attnscope.viz.positional import (
    encoding_curves,
    offset_profile,
    relative_bias_heatmap,
    relative_bias_lines,
    similarity_heatmap,
)
from tests.engine_fixtures import T5, tiny_model
from tests.record_fixtures import SRC, pattern_record


def test_heatmap_uses_integer_axes_labelled_with_tokens() -> None:
    z = pattern_record("uniform").pattern("encoder", 1, 2)
    fig = attention_heatmap(z, SRC, SRC)
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2, 3, 4] and list(fig.layout.xaxis.ticktext) == list(SRC)
    assert np.allclose(np.asarray(fig.data[0].z, dtype=float), z)
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0.0, 1.0)
    assert attention_heatmap(z, SRC, SRC, per_head_scale=True).data[0].zmax is None


def test_masked_cells_are_empty_not_zero() -> None:
    masked = np.triu(np.ones((5, 5), bool), 1)
    z = np.asarray(attention_heatmap(np.full((5, 5), 0.2), SRC, SRC, masked=masked).data[0].z, dtype=float)
    assert np.isnan(z[0, 1:]).all() and not np.isnan(np.tril(z)).any()


def test_a_heatmap_of_another_value_names_it_and_scales_to_its_data() -> None:
    z = pattern_record("uniform").pattern("encoder", 0, 0)
    weights, norms = attention_heatmap(z, SRC, SRC), attention_heatmap(z, SRC, SRC, value="‖a·f(x)‖")
    assert "weight %{z" in weights.data[0].hovertemplate and weights.data[0].colorbar.title.text == "weight"
    assert "‖a·f(x)‖ %{z" in norms.data[0].hovertemplate and "weight" not in norms.data[0].hovertemplate
    assert norms.data[0].colorbar.title.text == "‖a·f(x)‖" and (norms.data[0].zmin, norms.data[0].zmax) == (None, None)
    long = attention_heatmap(np.ones((90, 90)) / 90, [str(i) for i in range(90)], [str(i) for i in range(90)], value="n")
    assert long.data[0].hovertemplate.startswith("query %{y}") and "<br>n %{z" in long.data[0].hovertemplate


@pytest.mark.parametrize("build", [
    lambda: attention_heatmap(np.zeros((3, 3)), ["p", "q"], ["a", "b", "c"]),
    lambda: attention_heatmap(np.zeros((3, 2)), ["a", "b", "c"], ["p", "q", "r"]),
])
def test_label_mismatch_names_the_tokens(build) -> None:
    with pytest.raises(ValueError, match=r"\['p', 'q'"):
        build()


def test_beam_tree_highlights_the_chosen_path() -> None:
    nodes = [BeamNode(0, None, 0, 1, 0.0, "extended"), BeamNode(1, 0, 1, 5, -0.1, "extended"),
             BeamNode(2, 0, 1, 6, -0.5, "pruned"), BeamNode(3, 1, 2, 2, -0.2, "finished", -0.1)]
    fig = beam_tree(BeamResult([([5, 2], -0.1, -0.2)], nodes), str, highlight=3)
    names = {t.name for t in fig.data if t.name}
    assert names == {"extended", "pruned", "finished"}
    (red,) = [t for t in fig.data if t.mode == "lines" and t.line.color == "crimson"]
    # two edges, each an elbow from one step's row to the next: root -> 5 -> <eos>
    assert [y for y in red.y if y is not None] == [0, 0.5, 0.5, 1, 1, 1.5, 1.5, 2]


def test_positional_figures() -> None:
    table = sinusoidal_table(40, 16).numpy()
    assert np.allclose(np.asarray(similarity_heatmap(table, title="").data[0].z, dtype=float), table @ table.T, atol=1e-4)
    curves = offset_profile(table, [0, 10], title="")
    first, second = (np.asarray(t.y, dtype=float) for t in curves.data)
    assert np.allclose(first[:30], second[:30], atol=1e-4)  # depends only on the offset
    assert len(encoding_curves(table, [0, 1, 5], title="").data) == 3


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_relative_bias_figures_show_the_table(stack: str) -> None:
    """Every cell of the heatmap and every point of the lines is the model's table at the offset's bucket, read
    directly (bucket b = relative_bucket(offset), table (buckets, heads))."""
    from attnscope.engine.inside.relative import relative_bias, span
    from attnscope.model.positions import relative_bucket

    model = tiny_model(0, **T5)
    bias = relative_bias(model, stack, span(model))
    layer = (model.encoder if stack == "encoder" else model.decoder)[0].relative_bias
    table = layer.table.weight.detach().numpy()
    want = table[relative_bucket(torch.tensor(bias.offsets), 8, 5, stack == "encoder").numpy()].T  # (H, N)
    heatmap = relative_bias_heatmap(bias.offsets, bias.buckets, bias.bias, title="")
    assert np.array_equal(np.asarray(heatmap.data[0].z), want) and list(heatmap.data[0].x) == list(bias.offsets)
    assert np.array_equal(np.asarray(heatmap.data[0].customdata)[0], bias.buckets)
    lines = relative_bias_lines(bias.offsets, bias.buckets, bias.bias, title="")
    assert [t.name for t in lines.data] == [f"head {h}" for h in range(4)]
    assert np.array_equal(np.stack([np.asarray(t.y) for t in lines.data]), want)


def wide_beam() -> BeamResult:
    """Three finished hypotheses and a pruned branch: root -> a -> <eos>, root -> b -> <eos>, root -> c -> <eos>."""
    nodes = [BeamNode(0, None, 0, 1, 0.0, "extended"), BeamNode(1, 0, 1, 5, -0.1, "extended"),
             BeamNode(2, 0, 1, 6, -0.3, "extended"), BeamNode(3, 0, 1, 7, -0.6, "extended"),
             BeamNode(4, 0, 1, 8, -0.9, "pruned"), BeamNode(5, 1, 2, 2, -0.2, "finished", -0.1),
             BeamNode(6, 2, 2, 2, -0.4, "finished", -0.2), BeamNode(7, 3, 2, 2, -0.7, "finished", -0.35)]
    return BeamResult([([5, 2], -0.1, -0.2), ([6, 2], -0.2, -0.4), ([7, 2], -0.35, -0.7)], nodes)


def test_beam_tree_collapses_to_the_best_paths_and_expands() -> None:
    beam = wide_beam()
    assert hypothesis_nodes(beam) == [5, 6, 7]

    def drawn(fig: go.Figure) -> list[int]:
        return sorted(i for t in fig.data if t.mode == "markers+text" for i, *_ in t.customdata)

    top = beam_tree(beam, str, highlight=5, top=1, show_pruned=False)
    assert drawn(top) == [0, 1, 5] and "5 of 8 nodes collapsed" in top.layout.title.text
    assert drawn(beam_tree(beam, str, highlight=7, top=1, show_pruned=False)) == [0, 1, 3, 5, 7]  # the chosen path too
    assert drawn(beam_tree(beam, str, top=None, show_pruned=True)) == list(range(8))
    pruned = next(t for t in beam_tree(beam, str).data if t.name == "pruned")
    assert list(pruned.text) == [""]  # pruned nodes are markers (hover), never a pile of labels


def test_long_inputs_thin_labels_and_scale_per_map() -> None:
    tokens = [f"t{i}" for i in range(100)]
    ticks, text = thinned_ticks(tokens)
    assert len(ticks) <= MAX_TICKS and ticks[:2] == [0, 3] and text[1] == "t3"
    weights = np.full((100, 100), 0.01)
    fig = attention_heatmap(weights, tokens, tokens, per_head_scale=None)
    assert fig.data[0].zmax is None and fig.data[0].xgap == 0 and fig.data[0].customdata is None
    short = attention_heatmap(np.eye(3), ["a", "b", "c"], ["a", "b", "c"], per_head_scale=None)
    assert short.data[0].zmax == 1.0
    labelled = attention_heatmap(np.eye(2), ["x", "y"], ["a-very-long-piece", "b"])
    assert labelled.layout.margin.t > TITLE_PX + 7 * len("a-very-long-piece") * 0.8  # title above rotated labels


def test_colour_bars_and_log_axes_speak_plain_words() -> None:
    """Scales are named in words ("share of its head's maximum", not "÷ head max"); log axes write 1e-06,
    not SI prefixes ("1µ", "100n")."""
    from attnscope.engine.inside.offsets import rotation_check
    from attnscope.viz.attribution import methods_side_by_side
    from attnscope.viz.offsets import offset_fit_curves, rotation_errors

    methods = methods_side_by_side({"a": np.array([1.0, 3.0])}, ("s0", "s1"))
    title = methods.data[0].colorbar.title.text
    assert "÷" not in title and "maximum" in title
    check = rotation_check(sinusoidal_table(32, 8).numpy(), 2)
    for fig in (rotation_errors(check), offset_fit_curves([1, 2], {"sinusoidal": np.array([1e-7, 2e-7])})):
        axis = fig.layout.yaxis
        assert (axis.type, axis.exponentformat, axis.showexponent) == ("log", "e", "all")


def test_beam_tree_rows_grow_with_the_steps_and_labels_fit_their_column() -> None:
    """Steps run down the figure (one row each, so the figure grows instead of crowding); a token wider
    than its column is cut with "…" and named whole on hover."""
    from attnscope.viz.beam_tree import LABEL_PX, PLOT_PX, ROW_PX, fit_label

    beam = wide_beam()
    fig = beam_tree(beam, lambda i: f"Straßenbahnhaltestelle{i}", top=None, show_pruned=True)
    nodes = [t for t in fig.data if t.mode == "markers+text"]
    assert all(t.cliponaxis is False and t.textposition == "middle right" for t in nodes)
    assert sorted({y for t in nodes for y in t.y}) == [0, 1, 2] and fig.layout.height >= 3 * ROW_PX
    columns = 1 + max(x for t in nodes for x in t.x)
    for trace in nodes:
        for text, (_, _, _, whole) in zip(trace.text, trace.customdata):
            if text:
                assert text.endswith("…") and whole.startswith(text[:-1])
                assert len(text) * LABEL_PX <= PLOT_PX / columns  # fits its column
    assert fit_label("und", 100) == "und" and fit_label("Straßenbahn", 40) == "Stra…"
    low, high = fig.layout.yaxis.range
    assert low > 2 and high < 0  # step 0 on top


def test_a_stopped_search_s_beam_is_drawn_as_stopped() -> None:
    beam = wide_beam()
    beam.nodes[3].status, beam.nodes[3].score = "stopped", -0.6
    beam.hypotheses.insert(2, ([7], -0.6, -0.6))
    assert hypothesis_nodes(beam) == [5, 6, 3, 7]
    fig = beam_tree(beam, str, highlight=3)
    (stopped,) = [t for t in fig.data if t.name == "stopped"]
    assert [d[0] for d in stopped.customdata] == [3]
    assert "orange: in the beam when the search was stopped" in fig.layout.title.text
    assert "orange" not in beam_tree(wide_beam(), str).layout.title.text
