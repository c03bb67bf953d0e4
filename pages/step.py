"""Step through decoding: at each step the prefix, the choice, its rivals and where the model looked."""
import streamlit as st

from attnscope.ui import record_views, state, widgets
from attnscope.ui.stepping import beam_view, step_view

state.through_router()
st.title("Step through decoding")
if record_views.show_on_steps():  # a saved record opened on the Checkpoints page: its rows, read-only
    st.stop()
tr = state.translator()
if tr is None:
    st.stop()
text, beam, max_len, result = widgets.translated_sentence(tr)
step_view(tr, text, beam, max_len, result)
if beam > 1:
    beam_view(tr, text, beam, max_len, result)
