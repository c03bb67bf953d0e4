"""Model anatomy: the checkpoint's config, where the parameters are, and every tensor's shape."""
import streamlit as st

from attnscope.ui import anatomy_page, results, state, widgets
from attnscope.ui.checkpoints.manage import training_facts
from attnscope.ui.navigation import open_page
from attnscope.ui.query import Query

tr = open_page("Model anatomy")
c = tr.model.config
st.subheader("Config")
anatomy_page.config(c)  # full width: in half a column its meanings were cut to a few letters
st.subheader("Parameters")
anatomy_page.parameters(tr)
st.caption(" · ".join(training_facts(tr.bundle.summary)))

st.subheader("What each layer computes")
anatomy_page.layers(c)

st.subheader("Tensor shapes for the current sentence")
widgets.sentence_box(tr)
result = results.translate(tr, Query.from_view(tr, state.read()))
if result is not None:
    s, t = len(result.source_tokens), len(result.target_tokens)
    st.markdown(f"S = {s} source tokens, T = {t} decoder positions, D = {c.d_model}, H = {c.n_heads}, "
                f"d_head = {c.head_dim}{' = D / H' if c.d_head is None else ' (its own width)'}, V = {c.tgt_vocab_size}.")
    anatomy_page.shapes(tr, s, t)
