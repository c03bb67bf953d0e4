"""The "weights / weighted value norms" switch of the Translate and Step pages, and the relabelling of
figures that then show norms (Kobayashi et al., "Attention is Not Only a Weight", EMNLP 2020)."""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from attnscope.engine.attribution.norms import weighted_value_norms
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.records.attention import AttentionRecord
from attnscope.ui.cache import cached
from attnscope.ui.query import Query

VALUES = ("weights", "weighted value norms")
NORM_LABEL = "‖a·f(x)‖"  # what a weighted value norm is called on colour bars and hover


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


def relabel(fig: go.Figure, norms: bool) -> go.Figure:
    """Name the colour scale and hover value for norms (the builders call them weights); norms are
    not bounded by 1, so a fixed 0–1 colour range becomes the data's own."""
    if norms:
        for trace in fig.data:
            if isinstance(trace, go.Heatmap):
                trace.zmin, trace.zmax = None, None
                trace.hovertemplate = (trace.hovertemplate or "").replace("weight", NORM_LABEL)
                if (trace.colorbar.title.text or "").startswith("weight"):  # norms are always on their own scale
                    trace.colorbar.title.text = NORM_LABEL
        fig.update_layout(title_text=f"{fig.layout.title.text} · weighted value norms")
    return fig
