"""ui.query: a query's key names it exactly (checkpoint revision, sentence, beam, length, decoding rules)."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnscope.ui.query import Query
from tests.engine_fixtures import tiny_translator

queries = st.builds(Query, st.sampled_from(["tiny@0.0", "tiny@1.0", "other@0.0"]), st.text(max_size=8),
                    st.integers(1, 4), st.none() | st.integers(1, 64), st.sampled_from(["model", "attnscope"]))


@given(queries, queries)
def test_keys_are_equal_exactly_when_queries_are(a: Query, b: Query) -> None:
    assert (a.key == b.key) == (a == b)
    if a == b:
        assert hash(a.key) == hash(b.key)


@pytest.mark.parametrize("field, value", [("checkpoint", "tiny@2.0"), ("sentence", "a b c "), ("beam", 2),
                                          ("max_len", 10), ("max_len", None), ("rules", "attnscope")])
def test_changing_any_one_field_changes_the_key(field: str, value: object) -> None:
    base = Query("tiny@1.0", "a b c", 1, 20)
    assert dataclasses.replace(base, **{field: value}).key != base.key


def test_a_query_names_the_translators_revision_and_refuses_another_translator() -> None:
    tr = tiny_translator(0)
    query = Query.of(tr, "a b c", 2, 10)
    assert query == Query(tr.cache_key, "a b c", 2, 10)
    republished = dataclasses.replace(tr, revision=1.0)  # the same name, a newer file
    assert query.on(republished).key != query.key and query.on(republished).sentence == "a b c"
    query.check(tr)
    with pytest.raises(ValueError, match="computed with"):
        query.check(republished)


def test_the_view_asks_its_question_within_the_models_limit() -> None:
    from attnscope.ui.state import ViewState

    tr = tiny_translator(0)
    limit = tr.model.config.max_len
    query = Query.from_view(tr, ViewState(sentence="a b", beam=3, max_len=limit + 50))
    assert query == Query(tr.cache_key, "a b", 3, limit)
    assert Query.from_view(tr, ViewState(sentence="a b")).max_len is None  # no number: the source sets the budget
