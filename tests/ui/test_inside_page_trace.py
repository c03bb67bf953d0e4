"""Inside one head's trace: one teacher-forced pass per sentence, kept as an object that head switches read."""
from __future__ import annotations

import streamlit as st

import attnscope
from attnscope.ui import inside_page


def test_the_trace_is_computed_once_and_read_not_copied() -> None:
    st.cache_resource.clear()
    tr = attnscope.load()
    result = tr.translate("A dog runs.")
    first = inside_page.sentence_trace(tr, result)
    assert not first.use_cache  # one teacher-forced pass, not a second step-by-step decode
    assert inside_page.sentence_trace(tr, result) is first  # a rerun (another head, query or step) reads memory
    assert len(first.target_ids) == len(result.target_ids)
