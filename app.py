"""attnscope: router and shared sidebar (the pages by section, active checkpoint, attention kind, layer, head)."""
import streamlit as st

from attnscope.ui import memory, models, navigation, preload, selection, state, url
from attnscope.ui.persist import keep
from attnscope.ui.selection import KIND_LABELS, KINDS

preload.import_heavy()  # before any page: concurrent first runs importing pandas would each get half of it
st.set_page_config(page_title="attnscope", page_icon=":material/visibility:", layout="wide")
memory.limit_arenas()
models.sweep_leftovers()  # once per server: uploads of sessions a killed server never ended
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
    st.selectbox("Checkpoint", choices, **keep(state.CHECKPOINT, choices[0]))
    tr = models.translator()
    if tr is not None:
        c = tr.model.config
        st.caption(f"{tr.bundle.src_lang} → {tr.bundle.tgt_lang} · {c.n_encoder_layers}+{c.n_decoder_layers} layers · "
                   f"{c.n_heads} heads · d_model {c.d_model}")
        st.radio("Attention", KINDS, format_func=KIND_LABELS.get, **keep(state.KIND, "cross"))
        view = state.read()
        selection.fit_to_model(view, c)
        st.selectbox("Layer", list(range(selection.n_layers(c, view.kind))), **keep(state.LAYER, 0))
        st.selectbox("Head", [state.MEAN, *range(c.n_heads)], **keep(state.HEAD, state.MEAN),
                     format_func=lambda h: "mean of heads" if h == state.MEAN else f"head {h}")

    with st.expander("Figure downloads"):
        st.radio("Camera button saves", ["png", "svg"], key=state.IMAGE_FORMAT, horizontal=True)

page.run()
url.write_url()
memory.release()
