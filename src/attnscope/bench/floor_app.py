"""The floor of the app-memory section (`python -m attnscope.bench --only app-memory`): the least a Streamlit app
holds that loads the served checkpoint as attnscope does and shows one captured translation of `?sentence=` as
text (no figures, no pages, no sidebar), with the app's heap settings (ui/memory.py); with `?table=1`, also one
three-row `st.dataframe` (Streamlit sends every table through pyarrow, which imports pandas). The bench serves
this file with `streamlit run`, never imports it: the served app's resident set above these rows is what
attnscope's pages cost."""
import os
from pathlib import Path

import streamlit as st

from attnscope.checkpoints import checkpoint
from attnscope.engine.decoding.translator import Translator
from attnscope.ui import memory


@st.cache_resource
def translator() -> Translator:
    """The one checkpoint in the served folder, loaded once per server."""
    (path,) = Path(os.environ["ATTNSCOPE_CHECKPOINTS"]).glob("*.safetensors")
    return Translator(*checkpoint.load(path))


memory.limit_arenas()
st.write(translator().translate(st.query_params["sentence"]).text)
if st.query_params.get("table"):
    st.dataframe([{"step": t, "token": w} for t, w in enumerate(("Ein", "Mann", "fährt"))])
st.caption("floor drawn")
memory.release()
