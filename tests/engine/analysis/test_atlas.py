"""The head atlas: the queries and keys it maps are the ones each head computed (against the single-sentence
tracer), every head's map is its own joint projection, and heads are grouped by their statistics."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.engine.analysis.atlas import atlas, head_map, vectors_each
from attnscope.engine.analysis.atlas_types import SIDES, group_of
from attnscope.engine.analysis.heads import head_stats
from attnscope.engine.recording.trace import Keep, decoder_inputs
from attnscope.engine.recording.tracer import trace
from attnscope.records.attention import KINDS
from tests.engine_fixtures import tiny_translator

SENTENCES = ["a b c d", "e f", "", "g h i j k l a", "b", "c c d d e"]


@pytest.fixture(scope="module")
def tr():
    return tiny_translator(0, eos_bias=2.0)


@pytest.fixture(scope="module")
def results(tr):
    return sorted(vectors_each(tr, SENTENCES, batch_size=2))


def test_queries_and_keys_are_what_each_head_computed_one_sentence_at_a_time(tr, results) -> None:
    assert [i for i, _ in results] == [0, 1, 3, 4, 5]  # the blank sentence is left out
    for i, got in results:
        result = tr.translate(SENTENCES[i])
        source, _ = tr.source(SENTENCES[i])
        traced = trace(tr.model, source, decoder_inputs(result.target_ids, tr.model.config.bos_id),
                       keep=Keep(weights=True, internals=True))
        assert got.target == result.attention.target_tokens and got.source == result.attention.source_tokens
        for kind in KINDS:
            for layer, sub in enumerate(traced.sublayers(kind)):
                np.testing.assert_allclose(got.queries[kind][layer], sub.internals.queries[0].numpy(), atol=1e-5)
                np.testing.assert_allclose(got.keys[kind][layer], sub.internals.keys[0].numpy(), atol=1e-5)
        assert np.allclose(got.stats["entropy"], head_stats(result.attention)["entropy"], atol=1e-4)


def test_every_head_is_its_own_joint_map_over_the_sample(results) -> None:
    mapped = atlas(results)
    vectors = [v for _, v in results]
    assert mapped.sentences == (0, 1, 3, 4, 5)
    for side in ("source", "target"):
        assert len(mapped.tokens[side]) == sum(len(getattr(v, side)) for v in vectors)
        assert mapped.tokens[side][0] == (0, 0, getattr(vectors[0], side)[0])
    for kind in KINDS:
        n_layers, n_heads = vectors[0].queries[kind].shape[:2]
        n_queries = len(mapped.tokens[SIDES[kind][0]])
        assert mapped.maps[kind].shape == (n_layers, n_heads, n_queries + len(mapped.tokens[SIDES[kind][1]]), 2)
        one = head_map(vectors, kind, n_layers - 1, n_heads - 1)
        np.testing.assert_array_equal(mapped.maps[kind][-1, -1, :n_queries], one.queries)
        np.testing.assert_array_equal(mapped.maps[kind][-1, -1, n_queries:], one.keys)
        assert ((mapped.explained[kind] > 0) & (mapped.explained[kind] <= 1 + 1e-9)).all()
    assert len(mapped.groups) == sum(v.shape[0] * v.shape[1] for v in vectors[0].queries.values())


def test_an_empty_sample_says_so() -> None:
    with pytest.raises(ValueError, match="no sentences to map"):
        atlas([])


ROW = dict(kind="encoder", bos_share=0.0, eos_share=0.1, previous_token=0.1, diagonal=0.1, next_token=0.1,
           max_weight=0.3)


@pytest.mark.parametrize(("change", "group"), [
    (dict(eos_share=0.45, bos_share=0.1), "sink"),
    (dict(previous_token=0.7), "previous-token"),
    (dict(diagonal=0.6), "positional"),
    (dict(next_token=0.55), "positional"),
    (dict(kind="cross", max_weight=0.8), "aligning"),
    (dict(kind="cross", previous_token=float("nan"), diagonal=float("nan"), next_token=float("nan")), "mixed"),
    ({}, "mixed"),
])
def test_heads_are_grouped_by_what_their_statistics_measure(change: dict, group: str) -> None:
    assert group_of({**ROW, **change}) == group
