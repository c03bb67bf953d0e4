"""Heads & layers: all heads at once, head statistics, comparisons, ablation, rollout."""
import streamlit as st

from attnscope.engine.analysis.heads import head_stats
from attnscope.engine.recording.record import KIND_LABELS
from attnscope.ui import heads_tools, record_views, tables, widgets
from attnscope.ui.navigation import open_page
from attnscope.ui.translation_view import show_translation
from attnscope.viz.grid import heads_grid

tr = open_page("Heads & layers", record_view=record_views.show_on_heads)  # an opened record: its grid and statistics
query, result = widgets.translated_sentence(tr)
show_translation(query.sentence, result.text, tr.bundle.tgt_lang)
kind = st.session_state.get("kind", "cross")
rows = result.output_tokens if kind == "cross" else None
head = st.session_state.get("head", "mean")
layer = min(st.session_state.get("layer", 0), result.attention.n_layers(kind) - 1)
widgets.chart(heads_grid(result.attention, kind, per_head_scale=st.session_state.get("per_head_scale", False),
                         row_labels=rows, selected=(layer, None if head == "mean" else head)), "heads-grid")

stats, compare, ablation, rollout = st.tabs(["Head statistics", "Compare", "Ablation", "Rollout"])
with stats:
    st.caption(f"{KIND_LABELS['encoder']}, {KIND_LABELS['decoder']} and cross-attention heads for this sentence. "
               "Click a column header to sort; hover over a header for what the column measures.")
    tables.table(head_stats(result.attention).round(3), tables.HEAD_STATS)
    heads_tools.split_statistics(tr)
with compare:
    heads_tools.comparison(tr, query, result)
with ablation:
    heads_tools.ablation(tr, query.sentence, result)
with rollout:
    heads_tools.rollout_view(result)
