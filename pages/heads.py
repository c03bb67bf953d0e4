"""Heads & layers: all heads at once, head statistics, comparisons, ablation, rollout."""
import streamlit as st

from attnscope.ui import heads_page, records, state, widgets
from attnscope.ui.navigation import open_page
from attnscope.ui.selection import KIND_LABELS
from attnscope.ui.translation_view import show_translation
from attnscope.ui.url import tabs_in_url

tr = open_page("Heads & layers", record_view=records.show_on_heads)  # an opened record: its grid and statistics
view = state.read()
query, result = widgets.translated_sentence(tr, view)
show_translation(query.sentence, result.text, tr.bundle.tgt_lang)
heads_page.all_heads(view, query, result)

# Only the open tab is computed and drawn (a rerun after a pick in the explorer stays light in the browser too).
stats, compare, ablation, rollout = tabs_in_url(["Head statistics", "Compare", "Ablation", "Rollout"], state.HEADS_TAB,
                                                on_change="rerun")
if stats.open:
    with stats:
        st.caption(f"{KIND_LABELS['encoder']}, {KIND_LABELS['decoder'].lower()} and cross-attention heads for this "
                   "sentence. Click a column header to sort; hover over a header for what the column measures.")
        heads_page.statistics(result)
        heads_page.split_statistics(tr)
if compare.open:
    with compare:
        heads_page.comparison(tr, view, query, result)
if ablation.open:
    with ablation:
        heads_page.ablation(tr, query.sentence, result)
if rollout.open:
    with rollout:
        heads_page.rollout_view(result)
