"""Translate a sentence and see every kind of attention, one head large and all heads at once."""
import streamlit as st

from attnscope.ui import figures, results, selection, state, widgets
from attnscope.ui.cache import result_key
from attnscope.ui.navigation import open_page
from attnscope.ui.records import show_opened
from attnscope.ui.selection import KIND_LABELS, KINDS
from attnscope.ui.translate_page import reference_comparison
from attnscope.ui.translation_view import show_translation
from attnscope.ui.values_switch import values_switch

tr = open_page("Translate", record_view=show_opened)  # a record opened on the Checkpoints page: shown without a model
view = state.read()
query, result = widgets.translated_sentence(tr, view)
show_translation(query.sentence, result.text, tr.bundle.tgt_lang)

head = selection.head(view)
record = result.attention
n_tokens, long = figures.longest_side(record)
per_head = st.toggle("Scale colours per head (instead of a fixed 0–1 scale)", value=long,
                     key=state.PER_HEAD_SCALE_LONG if long else state.PER_HEAD_SCALE)
shown, norms = values_switch(tr, query, result)  # weights, or weighted value norms
per_head = per_head or norms
if long:
    st.caption(figures.long_caption(n_tokens))
key = result_key("translate", query)
tabs = selection.kind_tabs(view)  # the sidebar's "Attention" and this page's tabs are one choice
for tab, kind in zip(tabs, KINDS):
    with tab:
        if not tab.open:
            continue  # only the chosen kind is drawn
        kind_layer = selection.layer(view, shown, kind)
        widgets.chart(figures.heatmap(result, shown, key, kind, kind_layer, head, per_head, norms), f"heatmap-{kind}")
        if st.checkbox("Show every layer and head", key=f"show-grid-{kind}", value=True):
            widgets.chart(figures.grid(result, shown, key, kind, kind_layer, head, per_head, norms), f"grid-{kind}")
            st.caption(f"{KIND_LABELS[kind]}: pick the large heatmap's layer and head in the sidebar (the outlined cell).")

with st.expander("Compare with a reference translation (teacher forcing)"):
    reference = st.text_input(f"Reference ({tr.bundle.tgt_lang})", key="reference")
    if reference.strip():
        forced = results.score(tr, query, reference)
        if forced is not None:
            reference_comparison(result, forced, selection.layer(view, record, "cross"), head)

with st.expander("Download the data behind these figures"):
    widgets.data_downloads(result, widgets.settings(tr, query), "translate")
