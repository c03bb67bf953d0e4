"""Differences of two attention maps, position by position, also when the tokens differ."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.engine.analysis.compare import map_difference


def test_same_tokens_give_the_plain_difference() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 4)), rng.random((3, 4))
    d = map_difference(a, "xyz", "abcd", b, "xyz", "abcd")
    assert d.same_tokens and d.row_labels == tuple("xyz") and d.col_labels == tuple("abcd")
    np.testing.assert_allclose(d.values, a - b)
    assert d.max_abs == pytest.approx(np.abs(a - b).max())
    assert (d.dropped_rows, d.dropped_cols) == (0, 0)


def test_a_changed_word_keeps_positions_and_labels_both_tokens() -> None:
    src_a, src_b = ["A", "little", "girl", "climbs", "<eos>"], ["A", "little", "boy", "climbs", "<eos>"]
    a, b = np.eye(5), np.full((5, 5), 0.2)
    d = map_difference(a, src_a, src_a, b, src_b, src_b)
    assert not d.same_tokens and d.col_labels[2] == "girl / boy" and d.col_labels[1] == "little"
    np.testing.assert_allclose(d.values, a - b)


def test_different_lengths_compare_the_shared_block() -> None:
    a, b = np.ones((4, 3)), np.zeros((2, 5))
    d = map_difference(a, "pqrs", "xyz", b, "pq", "xyzuv")
    assert d.values.shape == (2, 3) and (d.dropped_rows, d.dropped_cols) == (2, 2)
    np.testing.assert_allclose(d.values, 1.0)


def test_labels_must_match_the_maps() -> None:
    with pytest.raises(ValueError):
        map_difference(np.ones((2, 2)), "ab", "abc", np.ones((2, 2)), "ab", "ab")
