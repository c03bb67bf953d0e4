"""Figures kept across reruns, built once per (model, sentence, options, view).

Building a plotly figure costs 10-20 ms, and a rerun would rebuild it (the attention explorer draws the pages'
main heatmaps in the browser; these are the server-drawn ones left: a forced branch, a beam hypothesis). These caches are `st.cache_resource`, shared by
every session: callers only pass the figures to `st.plotly_chart` (which copies them) and
never modify them. `key` names the result exactly (`ui.cache.result_key`: its kind and query), so a
figure never outlives the translation it was drawn from.
"""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from attnscope.engine.decoding.translator import Translation
from attnscope.records.attention import AttentionRecord, Kind
from attnscope.ui.cache import ResultKey
from attnscope.ui.values_switch import value_labels
from attnscope.viz.heatmap import LONG_INPUT, is_long, record_heatmap


@st.cache_resource(max_entries=256, show_spinner=False)
def heatmap(_result: Translation, _record: AttentionRecord, key: ResultKey, kind: Kind, layer: int, head: int | None,
            per_head_scale: bool | None = None, norms: bool = False) -> go.Figure:
    """One head (or the mean) of one layer; cross rows are labelled by the token each step produced."""
    rows = _result.output_tokens if kind == "cross" else None
    value, note = value_labels(norms)
    return record_heatmap(_record, kind, layer, head, per_head_scale=per_head_scale, row_labels=rows, value=value,
                          title_note=note)


def longest_side(record: AttentionRecord) -> tuple[int, bool]:
    """The record's longer token sequence, and whether it is long enough to look pale on a 0–1 colour scale."""
    n_tokens = max(len(record.source_tokens), len(record.target_tokens))
    return n_tokens, is_long(n_tokens)


def long_caption(n_tokens: int) -> str:
    """Why a long sentence's maps are scaled per head."""
    return (f"{n_tokens} tokens: attention spread over more than {LONG_INPUT} tokens is pale on a 0–1 scale, "
            "so each map is scaled to its own maximum here (untick “colours per head” for 0–1); labels show every few "
            "tokens where they do not fit: zoom in for all, hover for any.")
