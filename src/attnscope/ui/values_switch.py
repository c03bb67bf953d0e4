"""The "weights / weighted value norms" switch of the Translate and Step pages, and what the figures then call
their values (Kobayashi et al., "Attention is Not Only a Weight", EMNLP 2020)."""
from __future__ import annotations

import streamlit as st

from attnscope.engine.attribution.norms import weighted_value_norms
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.records.attention import AttentionRecord
from attnscope.ui.cache import cached
from attnscope.ui.query import Query
from attnscope.viz.labels import WEIGHT

VALUES = ("weights", "weighted value norms")
NORM_LABEL = "‖a·f(x)‖"  # what a weighted value norm is called on colour bars and hover
NORM_NOTE = "weighted value norms"  # what the titles of figures of norms end with


def values_switch(tr: Translator, query: Query, result: Translation) -> tuple[AttentionRecord, bool]:
    """The switch: the record to draw (the result's weights, or its weighted value norms, cached per
    query), and whether it holds norms (unbounded, so colours scale per head)."""
    choice = st.segmented_control("Show", VALUES, default=VALUES[0], key="attn_values",
                                  help="Weighted value norms ||a_ij f(x_j)|| (Kobayashi et al., EMNLP 2020): each "
                                       "weight times the norm of what the head actually passes on from that token.")
    if choice != VALUES[1]:
        return result.attention, False
    query.check(tr)
    return cached("norms", query, lambda: weighted_value_norms(tr, result),
                  spinner="Computing weighted value norms…"), True


def value_labels(norms: bool) -> tuple[str, str]:
    """What the figures' numbers are called (colour bars, hover) and the note their titles end with."""
    return (NORM_LABEL, NORM_NOTE) if norms else (WEIGHT, "")
