"""Inside one head's trace: one teacher-forced pass per sentence, computed once and then read from the results'
store (reruns that follow a pick or fetch a layer trace nothing)."""
from __future__ import annotations

import pytest

import attnscope
from attnscope.engine.inside import traced
from attnscope.ui import inside_page
from attnscope.ui.query import Query


def test_the_trace_is_computed_once_then_read_from_the_results_store(monkeypatch: pytest.MonkeyPatch) -> None:
    tr = attnscope.load()
    query = Query.of(tr, "A dog runs, once.")
    result = tr.translate(query.sentence)
    passes = []
    real = traced.sentence_trace
    monkeypatch.setattr(traced, "sentence_trace", lambda *a, **k: passes.append(1) or real(*a, **k))
    first = inside_page.sentence(tr, query, result)
    assert not first.trace.use_cache  # one teacher-forced pass, not a second step-by-step decode
    again = inside_page.sentence(tr, query, result)
    assert len(passes) == 1  # a rerun (a layer fetched, a new epoch) reads the store
    assert len(again.trace.target_ids) == len(result.target_ids) == len(again.lenses)
