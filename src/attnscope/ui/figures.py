"""How long a sentence is for its colours: past LONG_INPUT tokens attention spreads thin, and a 0–1 colour scale
looks blank, so the explorer colours each map by its own maximum and the page says why."""
from __future__ import annotations

import streamlit as st

from attnscope.records.attention import AttentionRecord
from attnscope.viz.heatmap import LONG_INPUT, is_long


def longest_side(record: AttentionRecord) -> tuple[int, bool]:
    """The record's longer token sequence, and whether it is long enough to look pale on a 0–1 colour scale."""
    n_tokens = max(len(record.source_tokens), len(record.target_tokens))
    return n_tokens, is_long(n_tokens)


def scaled_per_head(record: AttentionRecord) -> bool:
    """Whether `record`'s maps start coloured per head (a long sentence); when they do, the page says why."""
    n_tokens, long = longest_side(record)
    if long:
        st.caption(long_caption(n_tokens))
    return long


def long_caption(n_tokens: int) -> str:
    """Why a long sentence's maps are scaled per head."""
    return (f"{n_tokens} tokens: attention spread over more than {LONG_INPUT} tokens is pale on a 0–1 scale, "
            "so each map is scaled to its own maximum here (untick “colours per head” for 0–1); labels show every few "
            "tokens where they do not fit: zoom in for all, hover for any.")
