"""Positional encodings: the sinusoids of the paper next to the loaded model's own encodings."""
import streamlit as st

from attnscope.ui import positional_page
from attnscope.ui.navigation import open_page

tr = open_page("Positional encoding")
c = tr.model.config
st.markdown(positional_page.introduction(c))
if c.positional == "relative":  # nothing added to the embeddings: its own positions first, the paper's after
    st.subheader("This model's own positions (relative: a bias on the scores)")
    positional_page.relative_biases(tr)
    st.subheader("The paper's sinusoids, for comparison")
    positional_page.paper_sinusoids(c)
else:
    n_pos, sinusoid = positional_page.paper_sinusoids(c)
    st.subheader(f"This model's own encodings ({c.positional})")
    positional_page.model_encodings(tr, n_pos, sinusoid)
