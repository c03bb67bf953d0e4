"""Attribution: what each source token and the target prefix actually contributed to each generated token."""
import streamlit as st

from attnscope.engine.attribution.agreement import agreement_matrix, token_agreement
from attnscope.engine.attribution.sentence import ATTENTION, VALUE_ZEROING
from attnscope.ui import attribution_tools as tools
from attnscope.ui import widgets
from attnscope.ui.navigation import open_page
from attnscope.ui.text import plain
from attnscope.viz.attribution import agreement_matrix_figure, methods_side_by_side, source_prefix_split, token_agreement_figure

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

split, methods, agreement, alignment, dataset = st.tabs(
    ["Source vs prefix", "Source tokens by method", "Agreement", "Alignment", "Dataset"])
with split:
    widgets.chart(source_prefix_split(outputs, att.split.source_share, att.split.method), "attr-split")
    st.caption("ALTI+ (Ferrando et al., EMNLP 2022), rolled out over layers with every token's residual path: the two "
               "shares of every token sum to one. Below, the same split by target position over the evaluation sample.")
    tools.shares_by_position_view(tr)
n_layers = att.weights.n_layers("cross")
layer = min(st.session_state.get("layer", n_layers - 1), n_layers - 1)
maps = att.source_maps(layer)
with methods:
    t = st.select_slider("Generated token", list(range(len(outputs))), key="attr_step",
                         format_func=lambda i: f"{i}: {outputs[i]}")
    widgets.chart(methods_side_by_side({m: v[t] for m, v in maps.items()}, att.source_tokens,
                                       title=f"Step {t} → “{outputs[t]}”: source tokens by method "
                                             f"(attention and norms: layer {layer}, all heads)"), "attr-methods")
    st.caption("Rows are scaled to their own maximum; hover for the value. The raw cross-attention row is the first. "
               "Pick the layer in the sidebar.")
with agreement:
    frame = token_agreement(maps, outputs)
    cols = st.columns(2)
    with cols[0]:
        widgets.chart(agreement_matrix_figure(agreement_matrix(frame), "Mean Spearman over tokens"), "attr-rho")
    with cols[1]:
        widgets.chart(agreement_matrix_figure(agreement_matrix(frame, "top1"), "Top-1 agreement (same top source token)"),
                      "attr-top1")
    against = st.selectbox("Per token, against", list(maps), index=list(maps).index(VALUE_ZEROING), key="attr_against")
    widgets.chart(token_agreement_figure(frame, outputs, against), "attr-tokens")
    st.caption(f"Spearman rank correlation over the source tokens; {ATTENTION} and norm-based use layer {layer}.")
with alignment:
    tools.alignment_view(tr, att)
with dataset:
    tools.dataset_comparison(tr)
