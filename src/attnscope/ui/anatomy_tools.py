"""What the Model anatomy page draws from the engine: where the parameters are and every tensor's shape."""
from __future__ import annotations

import streamlit as st

from attnscope.engine.decoding.translator import Translator
from attnscope.engine.inside.anatomy import parameter_table, shape_walkthrough


def parameters(tr: Translator) -> None:
    """The total and a row per parameter tensor."""
    table = parameter_table(tr.model)
    st.metric("Total parameters", f"{int(table['parameters'].sum()):,}")
    st.dataframe(table, hide_index=True, width="stretch")


def shapes(tr: Translator, n_source: int, n_target: int) -> None:
    """Every tensor's shape on the way through the model, for a sentence of these lengths."""
    st.dataframe(shape_walkthrough(tr.model, n_source, n_target), hide_index=True, width="stretch")
