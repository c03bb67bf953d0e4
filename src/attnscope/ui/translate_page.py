"""The Translate page's own view: its translation beside a teacher-forced reference, and where they diverge."""
from __future__ import annotations

from typing import Hashable

import streamlit as st

from attnscope.engine.decoding.translator import Translation
from attnscope.ui import tables
from attnscope.ui.explorer import explorer
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain


def divergence(free: Translation, forced: Translation) -> int | None:
    """First step where the free-running output differs from the reference, or None."""
    for t, (a, b) in enumerate(zip(free.target_ids, forced.target_ids)):
        if a != b:
            return t
    return None if len(free.target_ids) == len(forced.target_ids) else min(len(free.target_ids), len(forced.target_ids))


def reference_comparison(view: ViewState, name: Hashable, free: Translation, forced: Translation) -> None:
    """Free-running vs teacher-forced cross-attention (in the explorer, at the view's layer and head; `name` names
    the comparison), and where the outputs part ways."""
    split = divergence(free, forced)
    if split is None:
        st.success("The model's own translation is exactly the reference.")
    else:
        chose = free.output_tokens[split] if split < len(free.output_tokens) else "(end)"
        wanted = forced.output_tokens[split] if split < len(forced.output_tokens) else "(end)"
        st.warning(f"The outputs diverge at step {split}: the model chose “{plain(chose)}”, the reference has “{plain(wanted)}”.")
    cols = st.columns(2)
    with cols[0]:
        explorer(free.attention, view, (name, "free"), "explorer-ref-free", steps=free.steps, mode="map", kind="cross",
                 title="Free-running (the model's own output)", caption=False)
    with cols[1]:
        explorer(forced.attention, view, (name, "forced"), "explorer-ref-forced", steps=forced.steps, mode="map",
                 kind="cross", title="Teacher-forced on the reference", caption=False)
    import pandas as pd

    tables.table(pd.DataFrame({"step": list(range(len(forced.steps))), "reference token": list(forced.output_tokens),
                               "model's probability of it": [round(s.prob, 4) for s in forced.steps],
                               "model's own choice": [s.top_k[0][0] for s in forced.steps]}), tables.REFERENCE)
