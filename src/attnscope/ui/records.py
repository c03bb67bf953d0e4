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
from attnscope.records.attention import AttentionRecord, RecordError
from attnscope.ui import figures, state, tables, widgets
from attnscope.ui.explorer import explorer
from attnscope.ui.text import plain
from attnscope.ui.translation_view import show_translation

OPENED = state.Key("opened_record")  # (file name, AttentionRecord, meta) of the record opened on the Checkpoints page


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
        state.store(OPENED, (file.name, read_record(data, file.name), record_meta(data)))
    except RecordError as err:
        st.error(f"Record rejected: {plain(err)}")
        return
    st.success(plain(f"Opened {file.name}: the Translate, Step and Heads pages show it until you close it."))


def close() -> None:
    """Forget the opened record (the pages go back to the active checkpoint)."""
    state.forget(OPENED)
    widgets.forget_upload("open_record_file")


def show_opened() -> bool:
    """Draw the opened record the way Translate draws a translation; False when none is open."""
    opened = state.stored(OPENED)
    if opened is None:
        return False
    name, record, meta = opened
    st.info(plain(f"Showing the saved record {name} (no model runs; the Step and Heads pages show it too; teacher "
                  "forcing, probabilities, ablation and attribution need a model, so they use the active checkpoint)."))
    st.button("Close the record and translate again", on_click=close, key="close_record")
    show_translation(*headline(record, meta))
    if meta:
        st.caption(plain(", ".join(f"{k}: {v}" for k, v in meta.items() if k not in ("translation", OUTPUT_TOKENS))))
    _show(name, record, meta, "explorer-record")
    return True


def _show(name: str, record: AttentionRecord, meta: dict, key: str, mode: str = "heatmap") -> None:
    """The record in the explorer: cross-attention rows labelled by the token each step produced when the file
    says (as the live pages label them), coloured per head when the sentence is long."""
    explorer(record, state.read(), ("record", name, record.source_tokens, record.target_tokens, record.encoder.shape,
                                    record.cross.shape), key, output_tokens=produced_tokens(record, meta), mode=mode,
             per_head_scale=figures.longest_side(record)[1])


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
    opened = state.stored(OPENED)
    if opened is not None:
        st.caption(plain(f"This view runs the active checkpoint; the opened record {opened[0]} has attention only "
                         "(no model), so it is shown on Translate, Step and Heads."))


def _opened(page: str, needs_model: str, key: str) -> tuple[str, AttentionRecord] | None:
    """The opened record and its name, after the note of what this page shows of it; None when none is open."""
    opened = state.stored(OPENED)
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
    name, record = opened
    _show(name, record, state.stored(OPENED)[2], "explorer-record-step", mode="step")
    return True


def show_on_heads() -> bool:
    """The Heads page for an opened record: every layer and head, and per-head statistics; False when none is open."""
    opened = _opened("heads and layers", "Statistics over a sample of sentences, comparisons, ablation and rollout",
                     "close_record_heads")
    if opened is None:
        return False
    name, record = opened
    _show(name, record, state.stored(OPENED)[2], "explorer-record-heads")
    st.subheader("Head statistics of this sentence")
    tables.table(head_stats(record).round(3), tables.HEAD_STATS)
    return True
