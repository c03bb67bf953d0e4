"""The Translate page: the translation with every kind of attention in the explorer, its translation beside a
teacher-forced reference and where they diverge, and the data behind the figures."""
from __future__ import annotations

from typing import Hashable

import streamlit as st

from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.ui import figures, results, state, tables, widgets
from attnscope.ui.cache import show_held
from attnscope.ui.explorer import explorer
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain
from attnscope.ui.translation_view import show_translation
from attnscope.ui.values_switch import value_labels, values_switch

REFERENCE = state.Key("reference")  # the reference translation the user typed


def show(tr: Translator) -> None:
    """The page on the view's sentence: the explorer on its weights or weighted value norms, the comparison with a
    reference (on request) and the downloads."""
    view = state.read()
    query, result = widgets.translated_sentence(tr, view)
    show_translation(query.sentence, result.text, tr.bundle.tgt_lang)
    shown, norms = values_switch(tr, query, result)  # weights, or weighted value norms
    explorer(shown, view, ("translate", query.key, norms), "explorer-translate", steps=result.steps,
             value=value_labels(norms)[0], per_head_scale=figures.scaled_per_head(shown))
    show_held(result.attention)
    with st.expander("Compare with a reference translation (teacher forcing)"):
        reference = st.text_input(f"Reference ({tr.bundle.tgt_lang})", key=REFERENCE)
        if reference.strip():
            forced = results.score(tr, query, reference)
            if forced is not None:
                reference_comparison(view, ("reference", query.key, reference), result, forced)
    with st.expander("Download the data behind these figures"):
        widgets.data_downloads(result, widgets.settings(tr, query), "translate")


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
