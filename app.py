"""attnscope: router and shared sidebar (active checkpoint, attention kind, layer, head)."""
import streamlit as st

from attnscope.engine.record import KIND_LABELS, KINDS
from attnscope.ui import state

st.set_page_config(page_title="attnscope", page_icon="🔍", layout="wide")
state.restore_from_url()

with st.sidebar:
    st.markdown("## 🔍 attnscope")
    choices = list(state.available_checkpoints())
    if not choices:
        st.error(f"No checkpoints found in {state.shipped_dir()}.")
        st.stop()
    if st.session_state.get("checkpoint") not in choices:
        st.session_state["checkpoint"] = choices[0]
    st.selectbox("Checkpoint", choices, **state.keep("checkpoint", choices[0]))
    tr = state.translator()
    if tr is not None:
        c = tr.model.config
        st.caption(f"{tr.bundle.src_lang} → {tr.bundle.tgt_lang} · {c.n_encoder_layers}+{c.n_decoder_layers} layers · "
                   f"{c.n_heads} heads · d_model {c.d_model}")
        st.radio("Attention", KINDS, format_func=KIND_LABELS.get, **state.keep("kind", "cross"))
        n_layers = c.n_encoder_layers if st.session_state["kind"] == "encoder" else c.n_decoder_layers
        if st.session_state.get("layer", 0) >= n_layers:
            st.session_state["layer"] = n_layers - 1
        st.selectbox("Layer", list(range(n_layers)), **state.keep("layer", 0))
        heads = ["mean", *range(c.n_heads)]
        if st.session_state.get("head", "mean") not in heads:
            st.session_state["head"] = "mean"
        st.selectbox("Head", heads, format_func=lambda h: "mean of heads" if h == "mean" else f"head {h}",
                     **state.keep("head", "mean"))

    with st.expander("Figure downloads"):
        st.radio("Camera button saves", ["png", "svg"], key="image_format", horizontal=True)

pages = [st.Page("pages/translate.py", title="Translate", icon="🌍", default=True),
         st.Page("pages/step.py", title="Step through decoding", icon="👣"),
         st.Page("pages/heads.py", title="Heads & layers", icon="🧩"),
         st.Page("pages/inside.py", title="Inside one head", icon=":material/neurology:"),
         st.Page("pages/attribution.py", title="Attribution", icon=":material/insights:"),
         st.Page("pages/positional.py", title="Positional encoding", icon="〰️"),
         st.Page("pages/anatomy.py", title="Model anatomy", icon="🦴"),
         st.Page("pages/train.py", title="Train", icon="🏋️"),
         st.Page("pages/checkpoints.py", title="Checkpoints", icon="💾")]
st.navigation(pages).run()
state.write_url()
