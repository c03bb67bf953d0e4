"""Step through decoding: at each step the prefix, the choice, its rivals and where the model looked."""
import time

import streamlit as st

from attnscope.ui import state, widgets
from attnscope.ui.attribution_tools import relabel, values_switch
from attnscope.ui.record_tools import note_needs_model
from attnscope.ui.stepping import beam_view, force_branch, step_controls
from attnscope.ui.text import plain
from attnscope.viz.steps import shaded_tokens, step_rows, top_k_bars

state.through_router()
st.title("Step through decoding")
note_needs_model()
tr = state.translator()
if tr is None:
    st.stop()
text, beam, max_len, result = widgets.translated_sentence(tr)

t = step_controls(len(result.steps))
record, norms = values_switch(tr, result, text, beam, max_len)  # weights, or weighted value norms
step, rows = result.steps[t], record.step(t)
prefix = " ".join(result.target_tokens[: t + 1])
st.markdown(f"**Decoder input so far:** {plain(prefix)} → **chose** “{plain(step.token)}” with probability {step.prob:.3f}")
st.caption(f"Full translation: {plain(result.text)}")

layer, head = st.session_state.get("layer", 0), st.session_state.get("head", "mean")
layer = min(layer, rows.cross.shape[0] - 1)
source_row = rows.source_row(layer, None if head == "mean" else head)
who = "mean of heads" if head == "mean" else f"head {head}"
widgets.chart(shaded_tokens(result.source_tokens, source_row,
                            title=f"Source as seen at step {t} (cross-attention, layer {layer}, {who})"), "step-source")
left, right = st.columns([2, 3])
with left:
    widgets.chart(top_k_bars(step), "step-topk")
with right:
    widgets.chart(relabel(step_rows(rows.cross, rows.source_tokens, title=f"Cross-attention of step {t}, every layer and head"),
                          norms), "step-cross")
widgets.chart(relabel(step_rows(rows.decoder_self, result.target_tokens, n_visible=t + 1,
                                title=f"Decoder masked self-attention of step {t} (grey: future positions, masked)"), norms),
              "step-self")

if beam == 1:
    force_branch(tr, text, result, t, max_len)
else:
    beam_view(tr, text, result)

if st.session_state.get("playing") and t < len(result.steps) - 1:
    time.sleep(0.8)
    st.session_state["step"] = t + 1
    st.rerun()
st.session_state["playing"] = False if t >= len(result.steps) - 1 else st.session_state.get("playing", False)
