"""The Attribution page: the sentence's translation, what its measures are, and the open tab (only it is computed:
the split needs ALTI+ alone, a fraction of a second; integrated gradients, most of the page's cost, run only in the
two tabs that show them)."""
from __future__ import annotations

import streamlit as st

from attnscope.engine.decoding.translator import Translator
from attnscope.ui import state, widgets
from attnscope.ui.attribution import samples
from attnscope.ui.attribution import sentence as tools
from attnscope.ui.attribution import tabs as views
from attnscope.ui.translation_view import show_translation
from attnscope.ui.url import tabs_in_url

TAB = state.Key("attr_tab")  # the open tab, bound to the URL


def show(tr: Translator) -> None:
    """The page on the view's sentence."""
    view = state.read()
    query, result = widgets.translated_sentence(tr, view)
    show_translation(query.sentence, result.text, tr.bundle.tgt_lang)  # the headline, as on Translate and Heads
    with st.expander("What these measures are"):
        st.markdown(tools.explained())
        st.caption(tools.WHY_ALTI)
    split, methods, agreement, alignment, dataset = tabs_in_url(tools.TABS, TAB, on_change="rerun")
    with split:
        if split.open:
            exact = tools.contributions(tr, query, result)
            views.split_chart(result.output_tokens, exact.alti_plus)
            st.caption("ALTI+ (Ferrando et al., EMNLP 2022), rolled out over layers with every token's residual path: "
                       "the two shares of every token sum to one. Below, the same split by target position over the "
                       "evaluation sample.")
            samples.shares_by_position_view(tr, exact.seconds)
    with methods:
        if methods.open:
            att, layer = tools.every_attribution(tr, view, query, result)
            views.methods_view(att, att.source_maps(layer), layer)
            st.caption("Rows are scaled to their own maximum; hover for the value. The raw cross-attention row is the "
                       "first. Pick the layer in the sidebar.")
    with agreement:
        if agreement.open:
            att, layer = tools.every_attribution(tr, view, query, result)
            views.agreement_view(att.source_maps(layer), att.output_tokens, layer)
    with alignment:
        if alignment.open:
            tools.alignment_view(tr, query, result, samples.layer_summary(tr))
    with dataset:
        if dataset.open:
            samples.dataset_comparison(tr)
