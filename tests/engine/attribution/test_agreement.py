"""Rank agreement against scipy's Spearman, and the per-sentence attribution bundle on a tiny translator."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr

from attnscope.engine.attribution.agreement import (
    agreement_matrix,
    attention_best_layer,
    average_ranks,
    best_layer,
    layer_agreement,
    spearman_rows,
    token_agreement,
    top1_rows,
)
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.registry import names
from attnscope.engine.attribution.sentence import ALTI, ATTENTION, INTEGRATED, NORM, VALUE_ZEROING, attribute
from tests.engine_fixtures import tiny_translator


def test_spearman_rows_equal_scipy_with_ties_and_nan_for_constant_rows() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 4, (6, 7)).astype(float), rng.random((6, 7))
    a[5] = 2.0  # a constant row has no ranking
    got = spearman_rows(a, b)
    for t in range(5):
        assert got[t] == pytest.approx(spearmanr(a[t], b[t]).statistic)
    assert np.isnan(got[5])
    np.testing.assert_array_equal(top1_rows(np.eye(3), np.eye(3)[[0, 2, 1]]), [1.0, 0.0, 0.0])


def test_average_ranks_equal_scipy_rankdata_with_ties_and_nan() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(0, 5, (4, 3, 9)).astype(float)  # many ties
    x[1, 2, 4] = np.nan
    x[2, 0] = 7.0  # all tied
    x[3, 1] = rng.random(9)  # none tied
    np.testing.assert_array_equal(average_ranks(x), rankdata(x, axis=-1))
    assert np.isnan(average_ranks(x)[1, 2]).all() and not np.isnan(average_ranks(x)[1, 1]).any()
    np.testing.assert_array_equal(average_ranks(np.array([3.0, 1.0, 3.0, 2.0])), [3.5, 1.0, 3.5, 2.0])


def test_agreement_table_and_matrix() -> None:
    maps = {"x": np.array([[1.0, 2, 3], [3, 2, 1]]), "y": np.array([[1.0, 2, 3], [1, 2, 3]])}
    frame = token_agreement(maps, ("p", "q"))
    assert frame["spearman"].tolist() == pytest.approx([1.0, -1.0])
    assert frame["top1"].tolist() == [1.0, 0.0]
    matrix = agreement_matrix(frame)
    assert matrix.loc["x", "y"] == pytest.approx(0.0) and matrix.loc["x", "x"] == 1.0


@pytest.fixture(scope="module")
def attributions():
    tr = tiny_translator(0, eos_bias=2.0)
    return [attribute(tr, tr.translate(text), IGSettings(max_points=16)) for text in ("a b c d", "e f g", "h i j k l")]


def test_source_maps_have_every_method_on_the_same_axes(attributions) -> None:
    att = attributions[0]
    maps = att.source_maps(1)
    assert tuple(maps) == names() == ("attention", "norm-based", "ALTI+", "value zeroing", "gradient × input",
                                      "integrated gradients")
    shape = (len(att.output_tokens), len(att.source_tokens))
    assert all(m.shape == shape and np.all(m >= 0) for m in maps.values())
    np.testing.assert_allclose(maps[ATTENTION].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(maps[VALUE_ZEROING], att.value_zeroing.source)
    np.testing.assert_array_equal(maps[ALTI], att.alti_plus.source)
    assert att.split is att.alti_plus


def test_layer_agreement_covers_every_layer_and_picks_the_best(attributions) -> None:
    summary = layer_agreement(attributions)
    n_layers = attributions[0].weights.n_layers("cross")
    assert sorted(summary["layer"].unique()) == list(range(n_layers))
    assert set(summary["measure"]) == {ATTENTION, NORM}
    tokens = sum(len(a.output_tokens) for a in attributions)
    assert set(summary["tokens"]) == {tokens}
    rows = summary[(summary["measure"] == ATTENTION) & (summary["reference"] == INTEGRATED)]
    assert best_layer(summary, INTEGRATED) == int(rows.sort_values("spearman").iloc[-1]["layer"])
    assert summary["spearman"].between(-1, 1).all() and summary["top1"].between(0, 1).all()


def test_the_best_layer_from_attention_and_one_reference_is_the_summary_s(attributions) -> None:
    """What the Alignment tab uses: no gradients needed, the same layer as the full comparison picks."""
    for att in attributions:
        for ref in (VALUE_ZEROING, ALTI, INTEGRATED):
            reference = att.source_maps(0)[ref]
            assert attention_best_layer(att.weights, reference) == best_layer(layer_agreement([att]), ref)
