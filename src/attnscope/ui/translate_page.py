"""The Translate page's own view: its translation beside a teacher-forced reference, and where they diverge."""
from __future__ import annotations

import streamlit as st

from attnscope.engine.decoding.translator import Translation
from attnscope.ui import tables, widgets
from attnscope.ui.text import plain
from attnscope.viz.heatmap import record_heatmap


def divergence(free: Translation, forced: Translation) -> int | None:
    """First step where the free-running output differs from the reference, or None."""
    for t, (a, b) in enumerate(zip(free.target_ids, forced.target_ids)):
        if a != b:
            return t
    return None if len(free.target_ids) == len(forced.target_ids) else min(len(free.target_ids), len(forced.target_ids))


def reference_comparison(free: Translation, forced: Translation, layer: int, head: int | None) -> None:
    """Free-running vs teacher-forced cross-attention, and where the outputs part ways."""
    split = divergence(free, forced)
    if split is None:
        st.success("The model's own translation is exactly the reference.")
    else:
        chose = free.output_tokens[split] if split < len(free.output_tokens) else "(end)"
        wanted = forced.output_tokens[split] if split < len(forced.output_tokens) else "(end)"
        st.warning(f"The outputs diverge at step {split}: the model chose “{plain(chose)}”, the reference has “{plain(wanted)}”.")
    cols = st.columns(2)
    kind_layer = min(layer, free.attention.n_layers("cross") - 1)
    with cols[0]:
        st.caption("Free-running (the model's own output)")
        widgets.chart(record_heatmap(free.attention, "cross", kind_layer, head, row_labels=free.output_tokens), "ref-free")
    with cols[1]:
        st.caption("Teacher-forced on the reference")
        widgets.chart(record_heatmap(forced.attention, "cross", kind_layer, head, row_labels=forced.output_tokens), "ref-forced")
    import pandas as pd

    tables.table(pd.DataFrame({"step": list(range(len(forced.steps))), "reference token": list(forced.output_tokens),
                               "model's probability of it": [round(s.prob, 4) for s in forced.steps],
                               "model's own choice": [s.top_k[0][0] for s in forced.steps]}), tables.REFERENCE)
