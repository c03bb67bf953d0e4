"""Step through decoding: at each step the prefix, the choice, its rivals and where the model looked."""
import streamlit as st

from attnscope.ui import state, widgets
from attnscope.ui.record_tools import note_needs_model
from attnscope.ui.stepping import beam_view, step_view

state.through_router()
st.title("Step through decoding")
note_needs_model()
tr = state.translator()
if tr is None:
    st.stop()
text, beam, max_len, result = widgets.translated_sentence(tr)
step_view(tr, text, beam, max_len, result)
if beam > 1:
    beam_view(tr, text, beam, max_len, result)
