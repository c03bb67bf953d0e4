"""Translate a sentence and see every kind of attention for the chosen layer and head."""
import streamlit as st

from attnscope.record import KIND_LABELS, KINDS
from attnscope.ui import state
from attnscope.viz.heatmap import record_heatmap

st.title("Translate")
tr = state.translator()
if tr is None:
    st.stop()

st.session_state.setdefault("sentence", state.EXAMPLES[0])
example = st.selectbox("Examples", ["—", *state.EXAMPLES], key="example")
if example != "—" and st.session_state.get("_last_example") != example:
    st.session_state["sentence"] = example
st.session_state["_last_example"] = example
text = st.text_area(f"Sentence ({tr.bundle.src_lang})", key="sentence", max_chars=2000, height=80)
col_beam, col_len = st.columns(2)
beam = col_beam.number_input("Beam size (1 = greedy)", 1, 16, 1, key="beam")
max_len = col_len.number_input("Maximum output tokens", 1, tr.model.config.max_len, min(100, tr.model.config.max_len), key="max_len")

result = state.translate(tr, text, int(beam), int(max_len))
if result is None:
    st.stop()
for note in result.notes:
    st.info(note)
st.subheader(f"Translation ({tr.bundle.tgt_lang})")
st.markdown(f"> {result.text or '(empty)'}")

layer, head = st.session_state.get("layer", 0), st.session_state.get("head", "mean")
per_head = st.toggle("Scale colours per head (instead of a fixed 0–1 scale)", key="per_head_scale")
tabs = st.tabs([KIND_LABELS[k] for k in KINDS])
for tab, kind in zip(tabs, KINDS):
    record = result.attention
    kind_layer = min(layer, record.n_layers(kind) - 1)
    rows = result.output_tokens if kind == "cross" else None
    tab.plotly_chart(record_heatmap(record, kind, kind_layer, None if head == "mean" else head,
                                    per_head_scale=per_head, row_labels=rows),
                     key=f"heatmap-{kind}", width="stretch")
