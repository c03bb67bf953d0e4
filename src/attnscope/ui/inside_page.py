"""The Inside one head page: the traced sentence shipped to the browser once (sections 1-5, drawn by the explorer's
"inside" mode, so picking a kind, layer, head, step or query token runs nothing on the server) and the positional
panels (6)."""
from __future__ import annotations

import numpy as np
import streamlit as st

from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.inside import traced
from attnscope.engine.inside.anatomy import model_positions
from attnscope.engine.inside.lens import logit_lenses
from attnscope.engine.inside.offsets import RotationCheck, offset_errors, rotation_check
from attnscope.engine.recording import trace
from attnscope.model.positions import sinusoidal_table
from attnscope.ui import explorer, positional_page, state, widgets
from attnscope.ui.cache import cached
from attnscope.ui.query import Query
from attnscope.ui.state import ViewState
from attnscope.viz.inside import Block, TracedSentence, layer_arrays, payload, present_layers, shared_arrays
from attnscope.viz.offsets import offset_fit_curves, rotation_circle, rotation_errors

EXPLORER = "inside"  # the explorer's key on this page
TAB = state.Key("inside_tab")  # the open tab, bound to the URL
PE_POSITIONS, PE_OFFSET = state.Key("inside_pe_positions"), state.Key("inside_pe_offset")  # section 6's inputs
PE_PAIR = state.Key("inside_pe_pair")
HEAD_TAB, POSITIONS_TAB = "1–5 · The head, step by step", "6 · Positional encodings (section 3.5)"


def decoder_inputs(tr: Translator, result: Translation) -> tuple[int, ...]:
    """What the decoder read over the whole translation: <bos> y1 .. y_{n-1}; step t read the first t+1."""
    return tuple(trace.decoder_inputs(result.target_ids, tr.model.config.bos_id))


# A resource, kept as one object outside the results' store: a long output's trace (every intermediate of every
# layer: ~30 MB a layer for 400 tokens on opus-mt's shape) would take the store's whole budget and push out the
# translation it traces, which the next rerun would decode again. Few are kept; nothing writes into them.
@st.cache_resource(max_entries=4, show_spinner="Tracing the forward pass…")
def _sentence(_tr: Translator, _result: Translation, checkpoint_key: str, source_ids: tuple[int, ...],
              target_ids: tuple[int, ...]) -> TracedSentence:
    with _tr.inference():
        whole = traced.sentence_trace(_tr.model, source_ids, target_ids)
    lenses = logit_lenses(_tr.model, whole, [s.token_id for s in _result.steps])
    return TracedSentence.of(whole, lenses, _tr.bundle.tgt_codec.piece, _result.attention, _result.steps,
                             _tr.model.config.embed_norm)


def sentence(tr: Translator, result: Translation) -> TracedSentence:
    """Every intermediate of the whole translation (one teacher-forced pass) and the logit lens at every step,
    computed once per sentence and model."""
    return _sentence(tr, result, tr.cache_key, result.source_ids, decoder_inputs(tr, result))


def head_explorer(tr: Translator, result: Translation, view: ViewState) -> None:
    """Sections 1-5 in the browser, opened on the session's kind, layer, head (head 0 for the mean of heads, as the
    page says), step and that kind's query token: every layer at once, or, for a long sentence, the open layer's
    bytes, the browser asking for another when it is picked."""
    whole = sentence(tr, result)
    current = explorer.selection_of(view, len(result.steps))
    name = explorer.view_id(("inside", tr.cache_key, result.source_ids, decoder_inputs(tr, result)))
    opened, epoch = explorer.opened_on(EXPLORER, name, current)
    query_token = state.stored(state.inside_query(opened.kind))

    def data(fetched: int | None) -> bytes:
        present = present_layers(whole, current.layer if fetched is None else fetched)
        layers = [Block.of(layer_arrays(whole, layer)) for layer in present]
        return payload(whole, Block.of(shared_arrays(whole)), layers, view_id=name, selection=opened,
                       query=query_token, epoch=epoch, present=present)

    explorer.mount(EXPLORER, data)


def rotation(tr: Translator, query: Query, n_positions: int, offset: int) -> RotationCheck:
    """Section 3.5's rotation check on this (sinusoidal) model's own table (cached)."""
    return cached("inside-rotation", query, lambda: rotation_check(model_positions(tr.model, n_positions), offset,
                                                                 tr.model.config.sinusoid), n_positions, offset)


def fit_errors(tr: Translator, query: Query, n_positions: int, offsets: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Relative error of the best orthogonal offset map, this model's table next to sinusoids (cached)."""
    def compute() -> dict[str, np.ndarray]:
        own = model_positions(tr.model, n_positions)
        return {f"this model ({tr.model.config.positional})": offset_errors(own, list(offsets)),
                "sinusoidal, same size": offset_errors(sinusoidal_table(n_positions, own.shape[1]).numpy(),
                                                       list(offsets))}

    return cached("inside-offsets", query, compute, n_positions, offsets)


def clamp(key: str, low: int, high: int, default: int) -> int:
    """Keep a number widget's stored value within its (model-dependent) range before drawing it."""
    value = min(max(state.stored(key, default), low), high)
    state.store(key, value)
    return value


def positional_panels(tr: Translator, query: Query) -> None:
    """Section 3.5: an offset as a linear map of the positional encoding, checked on this model's table; for T5's
    relative positions, which add nothing to the embeddings, the bias they add to the scores instead."""
    c = tr.model.config
    if c.positional == "relative":
        st.subheader("6 · Positions: a bias on the scores, by offset (relative)")
        positional_page.relative_biases(tr)
        return
    st.subheader(f"6 · Positional encodings: offsets as rotations ({c.positional})")
    cols = st.columns(3)
    clamp(PE_POSITIONS, 8, c.max_len, min(64, c.max_len))
    n_pos = cols[0].slider("Positions", 8, c.max_len, key=PE_POSITIONS)
    clamp(PE_OFFSET, 1, n_pos - 1, 3)
    offset = cols[1].number_input("Offset k", 1, n_pos - 1, key=PE_OFFSET)
    if c.positional == "sinusoidal":
        clamp(PE_PAIR, 0, c.d_model // 2 - 1, 0)
        pair = cols[2].number_input("Frequency pair i", 0, c.d_model // 2 - 1, key=PE_PAIR)
        check = rotation(tr, query, n_pos, int(offset))
        st.caption(f"PE(t+{offset}) computed by rotating each (sin, cos) pair of PE(t) by ω_i·{offset}, against the "
                   f"model's own table for t < {n_pos - offset}: max error {check.max_error:.1e} (float32 rounding). "
                   f"{positional_page.LAYOUTS[c.sinusoid]}")
        left, right = st.columns(2)
        with left:
            widgets.chart(rotation_circle(check, int(pair)), "inside-rotation")
        with right:
            widgets.chart(rotation_errors(check), "inside-rotation-errors")
    offsets = tuple(range(1, min(16, n_pos - 1) + 1))
    widgets.chart(offset_fit_curves(offsets, fit_errors(tr, query, n_pos, offsets)), "inside-offset-fit")
    if c.positional == "learned":
        own, sinusoid = fit_errors(tr, query, n_pos, (int(offset),)).values()
        st.caption(f"Learned encodings have no formula: the curve is the best rotation (orthogonal map) fitted by "
                   f"least squares for each offset, next to sinusoids of the same size, where it is exact. "
                   f"Offset {offset}: relative error {float(own[0]):.2f} here, {float(sinusoid[0]):.1e} for sinusoids.")


def show(tr: Translator) -> None:
    """The page: the sentence, then its two tabs, only the open one drawn (the head's sections are answered in the
    browser; the positional panels' plotly charts would be redrawn on each pick the explorer reports)."""
    view = state.read()
    query, result = widgets.translated_sentence(tr, view)
    head_tab, positions_tab = st.tabs([HEAD_TAB, POSITIONS_TAB], key=TAB, on_change="rerun",
                                      bind="query-params")  # the open tab is in the URL
    with head_tab:
        if head_tab.open:
            head_explorer(tr, result, view)
    with positions_tab:
        if positions_tab.open:
            _positions(tr, query)


@st.fragment
def _positions(tr: Translator, query: Query) -> None:
    """Section 6: reruns alone when its sliders move."""
    positional_panels(tr, query)
