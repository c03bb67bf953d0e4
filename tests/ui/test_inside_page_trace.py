"""Inside one head's trace: one teacher-forced pass per sentence, kept as an object that every payload reads."""
from __future__ import annotations

import streamlit as st

import attnscope
from attnscope.ui import inside_page


def test_the_trace_is_computed_once_and_read_not_copied() -> None:
    st.cache_resource.clear()
    tr = attnscope.load()
    result = tr.translate("A dog runs.")
    first = inside_page.sentence(tr, result)
    assert not first.trace.use_cache  # one teacher-forced pass, not a second step-by-step decode
    assert inside_page.sentence(tr, result) is first  # a rerun (a layer fetched, a new epoch) reads memory
    assert len(first.trace.target_ids) == len(result.target_ids) == len(first.lenses)
