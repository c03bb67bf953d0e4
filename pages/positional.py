"""Positional encodings: the sinusoids of the paper next to the loaded model's own encodings."""
import streamlit as st

from attnscope.ui import positional_tools
from attnscope.ui.navigation import open_page

tr = open_page("Positional encoding")
c = tr.model.config
st.markdown(positional_tools.introduction(c))
n_pos, sinusoid = positional_tools.paper_sinusoids(c)
st.subheader(f"This model's own encodings ({c.positional})")
positional_tools.model_encodings(tr, n_pos, sinusoid)
