"""ui.figures: a step's views of every layer and head are kept once per step, whatever head the sidebar shows."""
from __future__ import annotations

import streamlit as st

from attnscope.ui import figures
from attnscope.ui.cache import result_key
from attnscope.ui.query import Query
from tests.engine_fixtures import tiny_translator


def test_choosing_another_head_reuses_the_steps_rows_and_shades_the_source_anew() -> None:
    st.cache_resource.clear()
    tr = tiny_translator(0)
    result = tr.translate("3 4 5 6")
    key = result_key("translate", Query("tiny@0.0", "3 4 5 6", 1, 20))
    first = figures.step_views(result, result.attention, key, 0, 0, 0)
    other = figures.step_views(result, result.attention, key, 0, 1, None)
    assert other.cross is first.cross and other.self_ is first.self_ and other.top_k is first.top_k
    assert other.source != first.source  # layer 1's mean of heads, not layer 0's head 0
    later = figures.step_views(result, result.attention, key, 1, 0, 0)
    assert later.cross is not first.cross  # each step has its own rows
