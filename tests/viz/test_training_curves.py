"""Learning curves: losses on their own axis, scores on a fixed 0-100 axis with round ticks."""
from __future__ import annotations

from attnscope.viz.training import learning_curves


def test_scores_have_their_own_fixed_axis_with_round_ticks() -> None:
    fig = learning_curves([1, 2, 3], [3.0, 2.0, 1.5], [2, 3], [2.2, 1.4], [1.52, 1.858], [0.25, 0.5])
    y2 = fig.layout.yaxis2
    assert list(y2.range) == [0, 100] and y2.dtick == 20 and y2.tick0 == 0 and y2.overlaying == "y"
    assert fig.layout.yaxis.rangemode == "tozero"
    exact = next(t for t in fig.data if t.name == "exact matches (%)")
    assert list(exact.y) == [25.0, 50.0] and exact.yaxis == "y2"
    assert list(next(t for t in fig.data if t.name == "validation BLEU").y) == [1.52, 1.858]


def test_no_exact_trace_for_translation_runs() -> None:
    fig = learning_curves([1], [3.0], [1], [2.0], [10.0], [None])
    assert [t.name for t in fig.data] == ["training loss (smoothed)", "validation loss", "validation BLEU"]
