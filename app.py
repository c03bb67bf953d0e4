"""attnscope: router and shared sidebar (the pages by section, active checkpoint, attention kind, layer, head)."""
import streamlit as st

from attnscope.ui import memory, models, navigation, preload, selection, url
from attnscope.ui.persist import keep
from attnscope.ui.selection import KIND_LABELS, KINDS

preload.import_heavy()  # before any page: concurrent first runs importing pandas would each get half of it
st.set_page_config(page_title="attnscope", page_icon=":material/visibility:", layout="wide")
memory.limit_arenas()
page, sections = navigation.route()
url.restore_from_url()

with st.sidebar:
    st.markdown("## :material/visibility: attnscope")
    navigation.sidebar_links(sections)
    st.divider()
    choices = list(models.available_checkpoints())
    if not choices:
        st.error(f"No checkpoints found in {models.shipped_dir()}.")
        st.stop()
    missing = models.fit_checkpoint(choices)
    if missing:
        st.warning(missing)
    st.selectbox("Checkpoint", choices, **keep("checkpoint", choices[0]))
    tr = models.translator()
    if tr is not None:
        c = tr.model.config
        st.caption(f"{tr.bundle.src_lang} → {tr.bundle.tgt_lang} · {c.n_encoder_layers}+{c.n_decoder_layers} layers · "
                   f"{c.n_heads} heads · d_model {c.d_model}")
        st.radio("Attention", KINDS, format_func=KIND_LABELS.get, **keep("kind", "cross"))
        n_layers = c.n_encoder_layers if selection.kind() == "encoder" else c.n_decoder_layers
        st.session_state["layer"] = selection.fit_layer(n_layers)
        st.selectbox("Layer", list(range(n_layers)), **keep("layer", 0))
        heads = ["mean", *range(c.n_heads)]
        if st.session_state.get("head", "mean") not in heads:
            st.session_state["head"] = "mean"
        st.selectbox("Head", heads, format_func=lambda h: "mean of heads" if h == "mean" else f"head {h}",
                     **keep("head", "mean"))

    with st.expander("Figure downloads"):
        st.radio("Camera button saves", ["png", "svg"], key="image_format", horizontal=True)

page.run()
url.write_url()
memory.release()
