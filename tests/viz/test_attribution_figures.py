"""Attribution figures show the numbers they are given, on the right axes."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnscope.engine.analysis.alignment import align
from attnscope.viz.attribution import (
    alignment_figure,
    layer_agreement_figure,
    methods_side_by_side,
    shares_by_position_figure,
    source_prefix_split,
    token_agreement_figure,
)


def test_split_bars_are_the_shares_and_their_complement() -> None:
    fig = source_prefix_split(("x", "y", "<eos>"), np.array([0.2, 0.5, 0.9]))
    np.testing.assert_allclose(np.asarray(fig.data[0].y), [0.2, 0.5, 0.9])
    np.testing.assert_allclose(np.asarray(fig.data[0].y) + np.asarray(fig.data[1].y), 1.0)
    assert list(fig.layout.xaxis.ticktext) == ["x", "y", "<eos>"]
    assert fig.layout.title.text == "Where each generated token came from (ALTI+, rolled out)"
    with pytest.raises(ValueError, match="2 shares for 3 generated tokens"):
        source_prefix_split(("x", "y", "z"), np.array([0.1, 0.2]))


def test_methods_rows_are_scaled_to_their_maximum_with_raw_values_in_hover() -> None:
    fig = methods_side_by_side({"a": np.array([1.0, 3.0]), "b": np.array([-4.0, 2.0])}, ("s0", "s1"))
    np.testing.assert_allclose(np.asarray(fig.data[0].z), [[1 / 3, 1.0], [1.0, 0.5]])
    assert fig.data[0].customdata[1][0][1] == -4.0
    assert list(fig.layout.yaxis.ticktext) == ["a", "b"]
    with pytest.raises(ValueError, match="3 source tokens"):
        methods_side_by_side({"a": np.ones(2)}, ("p", "q", "r"))


def test_the_methods_title_sits_above_the_rotated_source_labels() -> None:
    """The title was placed by plotly inside a fixed 90 px top margin, where long rotated tokens also go."""
    import math

    from attnscope.viz.heatmap import TITLE_PX

    tokens = ("▁Two", "▁dogs", "▁are", "▁running", "▁through", "▁the", "▁snow", "▁Schlittenhunderennen", ".", "</s>")
    fig = methods_side_by_side({"a": np.ones(len(tokens))}, tokens, title="Step 3 → “Hunde”: source tokens by method "
                                                                            "(attention and norms: layer 2, all heads)")
    title = fig.layout.title
    assert title.yref == "container" and title.y == 1 and title.yanchor == "top"  # pinned to the figure's top edge
    labels_px = 7 * max(len(t) for t in tokens) * math.sin(math.radians(60))
    assert fig.layout.margin.t >= TITLE_PX + labels_px  # the labels have the rest of the margin to themselves


def test_alignment_figure_draws_one_line_per_link() -> None:
    m = np.array([[0.9, 0.1, 0.0], [0.1, 0.8, 0.1]])
    alignment = align(m, ("A", "B", "<eos>"), ("b", "a"))
    fig = alignment_figure(alignment)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == len(alignment.links) == 2
    assert list(fig.data[-2].text) == ["A", "B"] and list(fig.data[-1].text) == ["b", "a"]


def test_layer_and_token_agreement_figures() -> None:
    summary = pd.DataFrame({"layer": [0, 0, 1, 1], "measure": ["attention", "norm-based"] * 2,
                            "reference": ["value zeroing"] * 4, "spearman": [0.1, 0.2, 0.3, 0.4], "top1": [0, 1, 1, 1.0]})
    fig = layer_agreement_figure(summary)
    np.testing.assert_allclose(np.asarray(fig.data[0].z), [[0.1, 0.2], [0.3, 0.4]])
    assert list(fig.data[0].x) == ["attention vs value zeroing", "norm-based vs value zeroing"]
    frame = pd.DataFrame({"step": [0, 1, 0, 1], "token": ["x", "y"] * 2, "a": ["m", "m", "m", "n"],
                          "b": ["n", "n", "o", "o"], "spearman": [0.5, -0.5, 1.0, 0.0], "top1": [1, 0, 1, 0]})
    fig = token_agreement_figure(frame, ("x", "y"), "m")
    assert [t.name for t in fig.data] == ["n", "o"]
    np.testing.assert_allclose(np.asarray(fig.data[0].y), [0.5, -0.5])


def test_shares_by_position_draw_each_measure_where_enough_tokens_back_it() -> None:
    counts = np.array([50, 50, 40, 9, 12])
    means = {"ALTI+": np.array([0.74, 0.72, 0.7, 0.5, 0.6]), "value zeroing": np.array([0.99, 0.99, 0.98, 0.9, 0.97])}
    fig = shares_by_position_figure(counts, means, sentences=50)
    assert [t.name for t in fig.data] == ["ALTI+", "value zeroing"]
    np.testing.assert_array_equal(np.asarray(fig.data[0].x), [1, 2, 3, 5])  # position 4 has 9 tokens: left out
    np.testing.assert_allclose(np.asarray(fig.data[0].y), [0.74, 0.72, 0.7, 0.6])
    np.testing.assert_allclose(np.asarray(fig.data[1].y), [0.99, 0.99, 0.98, 0.97])
    np.testing.assert_array_equal(np.asarray(fig.data[0].customdata), [50, 50, 40, 12])
    assert fig.layout.title.text == "Source share by target position · 50 sentences"
    cited = fig.layout.annotations[0].text
    assert "Voita et al., ACL 2021" in cited and "Ferrando et al., EMNLP 2022" in cited and "falls" in cited
    with pytest.raises(ValueError, match="one mean per position"):
        shares_by_position_figure(counts, {"ALTI+": np.ones(3)}, sentences=50)


def test_contrast_bars_keep_the_signs_source_then_prefix() -> None:
    from attnscope.viz.attribution import contrast_bars

    fig = contrast_bars({"m": (np.array([0.5, -1.0]), np.array([0.25]))}, ["a", "b"], ["<bos>"], "why")
    (bars,) = fig.data
    assert list(bars.y) == [0.5, -1.0, 0.25] and list(bars.customdata) == ["src 0: a", "src 1: b", "tgt 0: <bos>"]
    with pytest.raises(ValueError, match="m: 2 scores for 3 source and prefix tokens"):
        contrast_bars({"m": (np.array([0.5]), np.array([0.25]))}, ["a", "b"], ["<bos>"])
