"""Heads & layers: all heads at once, head statistics, comparisons, ablation, rollout."""
import streamlit as st

from attnscope.ui import heads_tools, record_views, widgets
from attnscope.ui.navigation import open_page
from attnscope.ui.selection import KIND_LABELS
from attnscope.ui.translation_view import show_translation
from attnscope.ui.url import tabs_in_url

tr = open_page("Heads & layers", record_view=record_views.show_on_heads)  # an opened record: its grid and statistics
query, result = widgets.translated_sentence(tr)
show_translation(query.sentence, result.text, tr.bundle.tgt_lang)
kind = st.session_state.get("kind", "cross")
head = st.session_state.get("head", "mean")
layer = min(st.session_state.get("layer", 0), result.attention.n_layers(kind) - 1)
heads_tools.all_heads(result, kind, layer, None if head == "mean" else head)

stats, compare, ablation, rollout = tabs_in_url(["Head statistics", "Compare", "Ablation", "Rollout"], "heads_tab")
with stats:
    st.caption(f"{KIND_LABELS['encoder']}, {KIND_LABELS['decoder'].lower()} and cross-attention heads for this sentence. "
               "Click a column header to sort; hover over a header for what the column measures.")
    heads_tools.statistics(result)
    heads_tools.split_statistics(tr)
with compare:
    heads_tools.comparison(tr, query, result)
with ablation:
    heads_tools.ablation(tr, query.sentence, result)
with rollout:
    heads_tools.rollout_view(result)
