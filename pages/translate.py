"""Translate a sentence and see every kind of attention, one head large and all heads at once."""
import streamlit as st

from attnscope.engine.record import KIND_LABELS, KINDS
from attnscope.ui import state, widgets
from attnscope.ui.attribution_tools import relabel, values_switch
from attnscope.ui.compare import reference_comparison
from attnscope.ui.record_tools import show_opened
from attnscope.ui.text import plain
from attnscope.viz.grid import heads_grid
from attnscope.viz.heatmap import record_heatmap

state.through_router()
st.title("Translate")
if show_opened():  # a saved record opened on the Checkpoints page: shown without a model
    st.stop()
tr = state.translator()
if tr is None:
    st.stop()
text, beam, max_len, result = widgets.translated_sentence(tr)
st.subheader(f"Translation ({tr.bundle.tgt_lang})")
st.markdown(f"> {plain(result.text) or '(empty)'}")

layer, head = st.session_state.get("layer", 0), st.session_state.get("head", "mean")
head_index = None if head == "mean" else head
per_head = st.toggle("Scale colours per head (instead of a fixed 0–1 scale)", key="per_head_scale")
record, norms = values_switch(tr, result, text, beam, max_len)
per_head = per_head or norms
for tab, kind in zip(st.tabs([KIND_LABELS[k] for k in KINDS]), KINDS):
    with tab:
        kind_layer = min(layer, record.n_layers(kind) - 1)
        rows = result.output_tokens if kind == "cross" else None
        widgets.chart(relabel(record_heatmap(record, kind, kind_layer, head_index, per_head_scale=per_head, row_labels=rows),
                              norms), f"heatmap-{kind}")
        if st.checkbox("Show every layer and head", key=f"show-grid-{kind}", value=True):
            widgets.chart(relabel(heads_grid(record, kind, per_head_scale=per_head, row_labels=rows,
                                             selected=(kind_layer, head_index)), norms), f"grid-{kind}")
            st.caption("Pick the large heatmap's layer and head in the sidebar (the outlined cell).")

with st.expander("Compare with a reference translation (teacher forcing)"):
    reference = st.text_input(f"Reference ({tr.bundle.tgt_lang})", key="reference")
    if reference.strip():
        forced = state.score(tr, text, reference)
        if forced is not None:
            reference_comparison(result, forced, layer, head_index)

with st.expander("Download the data behind these figures"):
    widgets.data_downloads(result, widgets.settings(tr, text, beam, max_len), "translate")
