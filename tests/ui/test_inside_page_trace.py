"""Inside one head's trace: one teacher-forced pass per sentence, computed once and kept (reruns that follow a pick
or fetch a layer trace nothing)."""
from __future__ import annotations

import pytest
import streamlit as st

import attnscope
from attnscope.engine.inside import traced
from attnscope.ui import inside_page


def test_the_trace_is_computed_once_then_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    st.cache_resource.clear()
    tr = attnscope.load()
    result = tr.translate("A dog runs, once.")
    passes = []
    real = traced.sentence_trace
    monkeypatch.setattr(traced, "sentence_trace", lambda *a, **k: passes.append(1) or real(*a, **k))
    first = inside_page.sentence(tr, result)
    assert not first.trace.use_cache  # one teacher-forced pass, not a second step-by-step decode
    again = inside_page.sentence(tr, result)
    assert len(passes) == 1  # a rerun (a layer fetched, a new epoch) reads it
    assert len(again.trace.target_ids) == len(result.target_ids) == len(again.lenses)
