"""Attribution: what each source token and the target prefix actually contributed to each generated token."""
import streamlit as st

from attnscope.ui import attribution_tools as tools
from attnscope.ui import attribution_views as views
from attnscope.ui import widgets
from attnscope.ui.navigation import open_page
from attnscope.ui.text import plain
from attnscope.ui.url import tabs_in_url

tr = open_page("Attribution")
query, result = widgets.translated_sentence(tr)
st.markdown(f"> {plain(result.text) or '(empty)'}")
with st.expander("What these measures are"):
    st.markdown(tools.EXPLANATIONS)
    st.caption(tools.WHY_ALTI)
ig = tools.ig_controls()
att = tools.sentence_attribution(tr, query, result, ig)
outputs = att.output_tokens
tools.completeness_report(att.integrated_gradients)

split, methods, agreement, alignment, dataset = tabs_in_url(
    ["Source vs prefix", "Source tokens by method", "Agreement", "Alignment", "Dataset"], "attribution_tab")
with split:
    views.split_chart(att)
    st.caption("ALTI+ (Ferrando et al., EMNLP 2022), rolled out over layers with every token's residual path: the two "
               "shares of every token sum to one. Below, the same split by target position over the evaluation sample.")
    tools.shares_by_position_view(tr)
n_layers = att.weights.n_layers("cross")
layer = min(st.session_state.get("layer", n_layers - 1), n_layers - 1)
maps = att.source_maps(layer)
with methods:
    views.methods_view(att, maps, layer)
    st.caption("Rows are scaled to their own maximum; hover for the value. The raw cross-attention row is the first. "
               "Pick the layer in the sidebar.")
with agreement:
    views.agreement_view(maps, outputs, layer)
with alignment:
    tools.alignment_view(tr, att)
with dataset:
    tools.dataset_comparison(tr)
