"""ui.cache: one computation per (kind, query, extra), shared, never mixed up between kinds or queries."""
from __future__ import annotations

from typing import Callable

import pytest
import streamlit as st

from attnscope.ui.cache import cached, result_key
from attnscope.ui.query import Query

QUERY = Query("tiny@0.0", "a b c", 1, 20)


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    st.cache_data.clear()


def counted(value: object, calls: list[object]) -> Callable[[], object]:
    def compute() -> object:
        calls.append(value)
        return value
    return compute


def test_a_result_is_computed_once_per_key() -> None:
    calls: list[object] = []
    first = cached("translate", QUERY, counted(["x"], calls))
    again = cached("translate", Query("tiny@0.0", "a b c", 1, 20), counted(["y"], calls), spinner="Translating…")
    assert first == again == ["x"] and calls == [["x"]]


def test_kinds_queries_and_extra_arguments_do_not_collide() -> None:
    calls: list[object] = []
    named = {("translate",): cached("translate", QUERY, counted(1, calls)),
             ("norms",): cached("norms", QUERY, counted(2, calls)),
             ("force", (4,)): cached("force", QUERY, counted(3, calls), (4,)),
             ("force", (5,)): cached("force", QUERY, counted(4, calls), (5,)),
             ("beam 2",): cached("translate", Query("tiny@0.0", "a b c", 2, 20), counted(5, calls))}
    assert list(named.values()) == [1, 2, 3, 4, 5] and calls == [1, 2, 3, 4, 5]
    assert cached("norms", QUERY, counted(6, calls)) == 2  # still there, not overwritten by another kind
    assert len({result_key("translate", QUERY), result_key("norms", QUERY), result_key("force", QUERY, (4,))}) == 3


def test_each_caller_gets_its_own_copy() -> None:
    mine = cached("translate", QUERY, lambda: {"text": "x"})
    mine["text"] = "changed by one session"
    assert cached("translate", QUERY, lambda: {"text": "y"}) == {"text": "x"}


def test_a_failed_computation_is_not_cached() -> None:
    def fails() -> object:
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        cached("translate", QUERY, fails)
    assert cached("translate", QUERY, lambda: "ok") == "ok"
