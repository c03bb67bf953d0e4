"""The Attribution page's tabs that compare methods on one sentence: the source/prefix split, source tokens by
method, and how far the methods agree."""
from __future__ import annotations

import numpy as np
import streamlit as st

from attnscope.engine.attribution.agreement import agreement_matrix, token_agreement
from attnscope.engine.attribution.contributions import Contributions
from attnscope.engine.attribution.registry import methods
from attnscope.engine.attribution.sentence import VALUE_ZEROING, SentenceAttribution
from attnscope.ui import widgets
from attnscope.viz.attribution import agreement_matrix_figure, methods_side_by_side, source_prefix_split, token_agreement_figure


def split_chart(outputs: tuple[str, ...], split: Contributions) -> None:
    """Each generated token's share from the source and from the target prefix (ALTI+: SentenceAttribution.split)."""
    widgets.chart(source_prefix_split(outputs, split.source_share, split.method), "attr-split")


def methods_view(att: SentenceAttribution, maps: dict[str, np.ndarray], layer: int) -> None:
    """One generated token's source map under every method, side by side."""
    outputs = att.output_tokens
    t = st.select_slider("Generated token", list(range(len(outputs))), key="attr_step",
                         format_func=lambda i: f"{i}: {outputs[i]}")
    widgets.chart(methods_side_by_side({m: v[t] for m, v in maps.items()}, att.source_tokens,
                                       title=f"Step {t} → “{outputs[t]}”: source tokens by method "
                                             f"(attention and norms: layer {layer}, all heads)"), "attr-methods")


def agreement_view(maps: dict[str, np.ndarray], outputs: tuple[str, ...], layer: int) -> None:
    """Rank correlation and top-1 agreement between the methods, over the sentence and per token."""
    frame = token_agreement(maps, outputs)
    cols = st.columns(2)
    with cols[0]:
        widgets.chart(agreement_matrix_figure(agreement_matrix(frame), "Mean Spearman over tokens"), "attr-rho")
    with cols[1]:
        widgets.chart(agreement_matrix_figure(agreement_matrix(frame, "top1"), "Top-1 agreement (same top source token)"),
                      "attr-top1")
    against = st.selectbox("Per token, against", list(maps), index=list(maps).index(VALUE_ZEROING), key="attr_against")
    widgets.chart(token_agreement_figure(frame, outputs, against), "attr-tokens")
    per_layer = " and ".join(m.name for m in methods() if m.per_layer)
    st.caption(f"Spearman rank correlation over the source tokens; {per_layer} use layer {layer}.")
