"""One step's view of a sentence's attributions: split, scores and agreement equal their own computations."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from attnscope.engine.attribution.sentence import ALTI, ATTENTION, GRAD_X_INPUT, INTEGRATED, NORM, VALUE_ZEROING, attribute
from attnscope.engine.attribution.step_attribution import step_attributions
from tests.engine_fixtures import tiny_translator


@pytest.fixture(scope="module")
def att():
    tr = tiny_translator(0, eos_bias=2.0)
    return attribute(tr, tr.translate("a b c d e"))


def test_every_step_splits_between_source_and_prefix_and_sums_to_one(att) -> None:
    s = step_attributions(att, 1)
    np.testing.assert_allclose(s.source_share + s.prefix.sum(-1), 1.0, atol=1e-9)
    np.testing.assert_array_equal(s.source_share, att.alti_plus.source.sum(-1))  # the split is ALTI+'s
    np.testing.assert_array_equal(s.prefix, att.alti_plus.prefix)
    assert s.split_method == "ALTI+"
    assert s.prefix_tokens[0] == "<bos>" and len(s.prefix_tokens) == len(s.output_tokens)
    assert np.all(np.triu(s.prefix, 1) == 0)  # step t reads only the prefix up to its own input


def test_scores_and_agreement_per_step_equal_scipy_and_argmax(att) -> None:
    s = step_attributions(att, 0)
    assert list(s.maps) == [ATTENTION, NORM, ALTI, VALUE_ZEROING, GRAD_X_INPUT]  # no integrated gradients were computed
    np.testing.assert_array_equal(s.maps[ATTENTION], att.weights.mean_over_heads("cross", 0))
    reference = att.value_zeroing.source
    assert set(s.spearman) == set(s.top1) == {ATTENTION, NORM, ALTI, GRAD_X_INPUT}
    for method, scores in s.spearman.items():
        for t in range(len(s.output_tokens)):
            assert scores[t] == pytest.approx(spearmanr(s.maps[method][t], reference[t]).statistic)
            assert s.top1[method][t] == float(s.maps[method][t].argmax() == reference[t].argmax())


def test_top_tokens_are_the_largest_scores_in_order_with_ties_kept_in_place(att) -> None:
    s = step_attributions(att, 1)
    row = s.maps[GRAD_X_INPUT][2]
    top = s.top(s.maps[GRAD_X_INPUT], 2, 3)
    assert [v for _, v in top] == sorted(row, reverse=True)[:3]
    assert s.top(np.array([[0.2, 0.5, 0.5, 0.1]]), 0, 3) == [(1, 0.5), (2, 0.5), (0, 0.2)]


def test_a_reference_that_was_not_computed_is_named(att) -> None:
    with pytest.raises(ValueError, match="integrated gradients"):
        step_attributions(att, 0, reference=INTEGRATED)
