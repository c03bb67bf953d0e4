"""A saved attention record (from your own model, recorded in your code): opened on the Checkpoints page and shown
without a model on Translate, Step and Heads.

A record holds weights and tokens, nothing else: no probabilities, no model to run. So the Step page
shows each step's rows (where the decoder looked while choosing the next input) and the Heads page
the grid and per-head statistics of the sentence; each says which views need a live model.
"""
from __future__ import annotations

import streamlit as st

from attnscope.engine.analysis.heads import head_stats
from attnscope.engine.recording.record_files import OUTPUT_TOKENS, produced_tokens, read_record, record_meta
from attnscope.records.attention import KIND_LABELS, KINDS, AttentionRecord, RecordError
from attnscope.ui import figures, selection, state, tables, widgets
from attnscope.ui.step_page import step_controls
from attnscope.ui.text import plain
from attnscope.ui.translation_view import show_translation
from attnscope.viz.grid import heads_grid
from attnscope.viz.heatmap import record_heatmap
from attnscope.viz.steps import step_rows, step_source


def open_record() -> None:
    """Uploader on the Checkpoints page: an .npz/.json record becomes what Translate shows."""
    st.subheader("Open a saved attention record")
    st.caption("An .npz or .json file written by `AttentionRecord.to_npz()` / `to_json()` (e.g. `rec.to_record(...)` "
               "after `attnscope.record_attention` in your own code) or by `python -m attnscope translate --npz`. "
               "Translate, Step and Heads then show it; views that need a model to run keep using the active checkpoint.")
    file = widgets.new_upload("Attention record (.npz / .json)", "open_record_file")
    if file is None:
        return
    try:
        data = file.getvalue()
        state.store(state.OPENED_RECORD, (file.name, read_record(data, file.name), record_meta(data)))
    except RecordError as err:
        st.error(f"Record rejected: {plain(err)}")
        return
    st.success(plain(f"Opened {file.name}: the Translate, Step and Heads pages show it until you close it."))


def close() -> None:
    """Forget the opened record (the pages go back to the active checkpoint)."""
    state.forget(state.OPENED_RECORD)
    widgets.forget_upload("open_record_file")


def show_opened() -> bool:
    """Draw the opened record the way Translate draws a translation; False when none is open."""
    opened = state.stored(state.OPENED_RECORD)
    if opened is None:
        return False
    name, record, meta = opened
    st.info(plain(f"Showing the saved record {name} (no model runs; the Step and Heads pages show it too; teacher "
                  "forcing, probabilities, ablation and attribution need a model, so they use the active checkpoint)."))
    st.button("Close the record and translate again", on_click=close, key="close_record")
    show_translation(*headline(record, meta))
    if meta:
        st.caption(plain(", ".join(f"{k}: {v}" for k, v in meta.items() if k not in ("translation", OUTPUT_TOKENS))))
    view = state.read()
    head_index = selection.head(view, record.n_heads)
    for tab, kind in zip(selection.kind_tabs(view), KINDS):  # opened on the sidebar's kind, and setting it
        with tab:
            if not tab.open:
                continue  # only the chosen kind is drawn
            kind_layer, rows = selection.layer(view, record, kind), row_labels(record, meta, kind)
            widgets.chart(record_heatmap(record, kind, kind_layer, head_index, row_labels=rows), f"record-heatmap-{kind}")
            widgets.chart(heads_grid(record, kind, selected=(kind_layer, head_index), row_labels=rows),
                          f"record-grid-{kind}")
    return True


def row_labels(record: AttentionRecord, meta: dict, kind: str) -> tuple[str, ...] | None:
    """The live pages' row labels: cross-attention rows by the token each step produced, when the file says;
    None keeps the record's own queries."""
    return produced_tokens(record, meta) if kind == "cross" else None


def headline(record: AttentionRecord, meta: dict) -> tuple[str, str, str, str]:
    """What the record's headline shows (source, text, language, label): the translation its settings carry,
    else its decoder's input tokens (a record from your own code has no text)."""
    source = str(meta.get("sentence", " ".join(record.source_tokens)))
    language = str(meta.get("tgt_lang", "target"))
    if meta.get("translation"):
        return source, str(meta["translation"]), language, "Translation"
    return source, " ".join(record.target_tokens), language, "Target tokens the decoder read"


def note_needs_model() -> None:
    """On views that run the model: say that an opened record is not what they show."""
    opened = state.stored(state.OPENED_RECORD)
    if opened is not None:
        st.caption(plain(f"This view runs the active checkpoint; the opened record {opened[0]} has attention only "
                         "(no model), so it is shown on Translate, Step and Heads."))


def _opened(page: str, needs_model: str, key: str) -> tuple[str, AttentionRecord] | None:
    """The opened record and its name, after the note of what this page shows of it; None when none is open."""
    opened = state.stored(state.OPENED_RECORD)
    if opened is None:
        return None
    name, record, _ = opened
    st.info(plain(f"Showing the saved record {name} ({page}, read-only). {needs_model} need a live model: close the "
                  "record to use the active checkpoint."))
    st.button("Close the record", on_click=close, key=key)
    return name, record


def show_on_steps() -> bool:
    """The Step page for an opened record: each step's cross- and self-attention rows; False when none is open."""
    opened = _opened("step by step", "The chosen token's probability and its rivals, forcing another token, what "
                                     "a step relied on and the beam tree", "close_record_step")
    if opened is None:
        return False
    _, record = opened
    view = state.read()
    t = step_controls(view, record.n_steps)
    rows = record.step(t)
    chosen = record.target_tokens[t + 1] if t + 1 < record.n_steps else None
    st.markdown(f"**Decoder input so far:** {plain(' '.join(rows.prefix))}"
                + (f" → **next input** “{plain(chosen)}”" if chosen is not None else " (the last step of the record)"))
    st.html(step_source(rows, selection.layer(view, record, "cross"), selection.head(view, record.n_heads)))
    st.html(step_rows(rows.cross, record.source_tokens, title=f"Cross-attention of step {t}, every layer and head"))
    st.html(step_rows(rows.decoder_self, record.target_tokens, n_visible=t + 1,
                      title=f"Decoder masked self-attention of step {t} (grey: future positions, masked)"))
    return True


def show_on_heads() -> bool:
    """The Heads page for an opened record: every layer and head, and per-head statistics; False when none is open."""
    opened = _opened("heads and layers", "Statistics over a sample of sentences, comparisons, ablation and rollout",
                     "close_record_heads")
    if opened is None:
        return False
    _, record = opened
    view = state.read()
    kind = view.kind
    st.caption(f"{KIND_LABELS[kind]} (pick another kind, layer or head in the sidebar).")
    rows = row_labels(record, state.stored(state.OPENED_RECORD)[2], kind)
    widgets.chart(heads_grid(record, kind, per_head_scale=figures.scaled_per_head(view, record), row_labels=rows,
                             selected=(selection.layer(view, record, kind), selection.head(view, record.n_heads))),
                  "record-heads-grid")
    st.subheader("Head statistics of this sentence")
    tables.table(head_stats(record).round(3), tables.HEAD_STATS)
    return True
