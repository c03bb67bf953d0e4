"""ui.cache and ui.result_store: one computation per (kind, query, extra), shared, never mixed up between kinds or
queries, within a memory budget (least recently used dropped first, and said when computed again)."""
from __future__ import annotations

from typing import Callable

import pytest
import streamlit as st

from attnscope.ui.cache import BUDGET_MB, budget_bytes, cached, result_key
from attnscope.ui.query import Query
from attnscope.ui.result_store import ResultStore

QUERY = Query("tiny@0.0", "a b c", 1, 20)


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    st.cache_resource.clear()  # the store is a resource: made anew, with the budget the test sets


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


def test_a_result_that_is_not_shared_is_not_kept() -> None:
    """A decode one session stopped goes back to it, and the next caller computes its own."""
    calls: list[object] = []
    assert cached("translate", QUERY, counted("stopped", calls), shared=lambda r: r != "stopped") == "stopped"
    assert cached("translate", QUERY, counted("whole", calls), shared=lambda r: r != "stopped") == "whole"
    assert cached("translate", QUERY, counted("again", calls)) == "whole" and calls == ["stopped", "whole"]


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


def test_the_least_recently_used_results_go_first_when_the_budget_is_passed() -> None:
    store = ResultStore(budget=3_000)
    for key in "abc":
        assert store.put(key, "x" * 900) == []
    assert store.get("a") == (True, "x" * 900)  # a is now the most recent: b is the oldest
    assert store.put("d", "x" * 900) == ["b"] and store.size <= 3_000
    assert store.get("b") == (False, None) and store.was_dropped("b") and not store.was_dropped("a")
    store.put("b", "y")  # kept again: no longer dropped
    assert not store.was_dropped("b") and store.get("b") == (True, "y")


def test_a_result_larger_than_the_budget_is_kept_alone_until_the_next() -> None:
    store = ResultStore(budget=100)
    store.put("small", "s")
    assert store.put("huge", "x" * 1_000) == ["small"] and store.get("huge")[0]
    assert store.put("next", "n") == ["huge"] and store.size < 100


def test_the_budget_is_the_variable_or_a_share_of_the_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUDGET_MB, "2")
    assert budget_bytes() == 2 * 2**20
    monkeypatch.setenv(BUDGET_MB, "lots")
    assert 0 < budget_bytes() <= 2**30
    monkeypatch.delenv(BUDGET_MB)
    assert 0 < budget_bytes() <= 2**30


def test_a_dropped_result_is_computed_again_and_the_page_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    def page() -> None:
        from attnscope.ui.cache import cached
        from attnscope.ui.query import Query

        for sentence in ("a", "b", "a"):  # b's result pushes a's out; a is computed again
            cached("translate", Query("tiny@0.0", sentence, 1, 20), lambda s=sentence: s * 2_000)

    monkeypatch.setenv(BUDGET_MB, "0.003")  # ~3 KB: room for one result
    app = AppTest.from_function(page).run()
    assert not app.exception
    (note,) = [c.value for c in app.caption]
    assert note.startswith("This result had been dropped to keep the server's results within their memory budget")


def test_arrays_are_read_in_place_and_no_session_can_write_into_them() -> None:
    """A result's arrays are kept out of band: every copy reads the same bytes, and writing into one raises."""
    import numpy as np

    store = ResultStore(budget=10_000_000)
    store.put("r", {"weights": np.arange(100_000, dtype=np.float32), "text": "x"})
    (_, first), (_, second) = store.get("r"), store.get("r")
    assert first is not second and np.array_equal(first["weights"], np.arange(100_000, dtype=np.float32))
    assert np.shares_memory(first["weights"], second["weights"]) and 400_000 <= store.size < 401_000
    with pytest.raises(ValueError, match="read-only"):
        first["weights"][0] = 1.0
    first["text"] = "changed by one session"
    assert store.get("r")[1]["text"] == "x"


def test_what_capture_holds_is_said_in_megabytes_from_a_megabyte() -> None:
    import numpy as np

    from attnscope.records.attention import AttentionRecord
    from attnscope.ui.cache import held_note

    def record(heads: int) -> AttentionRecord:
        return AttentionRecord(("a",) * 64, ("b",) * 32, np.zeros((6, heads, 64, 64), np.float32),
                               np.zeros((6, heads, 32, 32), np.float32), np.zeros((6, heads, 32, 64), np.float32))
    assert held_note(record(16), 192 << 20).startswith(
        "Recorded attention: 2.6 MB of float32 (encoder 6 × 16 × 64 × 64, decoder 6 × 16 × 32 × 32, "
        "cross 6 × 16 × 32 × 64: layers")
    assert held_note(record(1), 192 << 20).startswith("Recorded attention: 168.0 KB of float32")
    assert held_note(record(1), 192 << 20).endswith("within 192 MB, least recently used first.")
