"""An opened attention record (Checkpoints page) on the Step and Heads pages: what a record holds, read-only.

A record holds weights and tokens, nothing else: no probabilities, no model to run. So the Step page
shows each step's rows (where the decoder looked while choosing the next input) and the Heads page
the grid and per-head statistics of the sentence; each says which views need a live model.
"""
from __future__ import annotations

import streamlit as st

from attnscope.engine.analysis.heads import head_stats
from attnscope.engine.recording.record import KIND_LABELS, AttentionRecord
from attnscope.ui import record_tools, selection, state, tables, widgets
from attnscope.ui.stepping import step_controls
from attnscope.ui.text import plain
from attnscope.viz.grid import heads_grid
from attnscope.viz.steps import step_rows, step_source


def _opened(page: str, needs_model: str, key: str) -> tuple[str, AttentionRecord] | None:
    """The opened record and its name, after the note of what this page shows of it; None when none is open."""
    opened = state.stored(state.OPENED_RECORD)
    if opened is None:
        return None
    name, record, _ = opened
    st.info(plain(f"Showing the saved record {name} ({page}, read-only). {needs_model} need a live model: close the "
                  "record to use the active checkpoint."))
    st.button("Close the record", on_click=record_tools.close, key=key)
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
    widgets.chart(heads_grid(record, kind, per_head_scale=view.per_head_scale,
                             selected=(selection.layer(view, record, kind), selection.head(view, record.n_heads))),
                  "record-heads-grid")
    st.subheader("Head statistics of this sentence")
    tables.table(head_stats(record).round(3), tables.HEAD_STATS)
    return True
