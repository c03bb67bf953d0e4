"""Translate a sentence and see every kind of attention, one head large and all heads at once (in the browser)."""
import streamlit as st

from attnscope.ui import figures, results, state, widgets
from attnscope.ui.explorer import explorer
from attnscope.ui.navigation import open_page
from attnscope.ui.records import show_opened
from attnscope.ui.translate_page import reference_comparison
from attnscope.ui.translation_view import show_translation
from attnscope.ui.values_switch import value_labels, values_switch

tr = open_page("Translate", record_view=show_opened)  # a record opened on the Checkpoints page: shown without a model
view = state.read()
query, result = widgets.translated_sentence(tr, view)
show_translation(query.sentence, result.text, tr.bundle.tgt_lang)

shown, norms = values_switch(tr, query, result)  # weights, or weighted value norms
explorer(shown, view, ("translate", query.key, norms), "explorer-translate", steps=result.steps,
         value=value_labels(norms)[0], per_head_scale=figures.scaled_per_head(shown))

with st.expander("Compare with a reference translation (teacher forcing)"):
    reference = st.text_input(f"Reference ({tr.bundle.tgt_lang})", key="reference")
    if reference.strip():
        forced = results.score(tr, query, reference)
        if forced is not None:
            reference_comparison(view, ("reference", query.key, reference), result, forced)

with st.expander("Download the data behind these figures"):
    widgets.data_downloads(result, widgets.settings(tr, query), "translate")
