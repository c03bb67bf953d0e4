"""The Inside one head page: the cached trace of a sentence, the page's selectors (kind, layer, head, step, query
token), one head's computation step by step (sections 1-5) and the positional panels (6)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.inside import traced
from attnscope.engine.inside.anatomy import model_positions
from attnscope.engine.inside.head_view import HeadView, head_view
from attnscope.engine.inside.lens import logit_lens
from attnscope.engine.inside.offsets import RotationCheck, offset_errors, rotation_check
from attnscope.engine.recording import trace
from attnscope.model.kinds import KIND_LABELS, KINDS, Kind
from attnscope.model.positions import sinusoidal_table
from attnscope.records.forward import ForwardTrace, LogitLens
from attnscope.ui import positional_page, selection, state, widgets
from attnscope.ui.persist import keep
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain
from attnscope.viz import inside
from attnscope.viz.lens import lens_table
from attnscope.viz.offsets import offset_fit_curves, rotation_circle, rotation_errors


@dataclass(frozen=True)
class Choice:
    """What the user opened: one head of one kind, one query position, at one decoding step."""

    kind: Kind
    layer: int
    head: int
    step: int
    query: int


def decoder_inputs(tr: Translator, result: Translation) -> tuple[int, ...]:
    """What the decoder read over the whole translation: <bos> y1 .. y_{n-1}; step t read the first t+1."""
    return tuple(trace.decoder_inputs(result.target_ids, tr.model.config.bos_id))


# Kept as objects (cache_resource), never copied: switching head, query or step reads memory, where a pickled copy
# (cache_data) took ~250 ms to unpickle on every rerun for an opus-mt-sized model. Nothing writes into a trace.
@st.cache_resource(max_entries=8, show_spinner="Tracing the forward pass…")
def _trace(_tr: Translator, checkpoint_key: str, source_ids: tuple[int, ...], target_ids: tuple[int, ...]) -> ForwardTrace:
    with _tr.inference():
        return traced.sentence_trace(_tr.model, source_ids, target_ids)


def sentence_trace(tr: Translator, result: Translation) -> ForwardTrace:
    """Every intermediate of the whole translation, from one teacher-forced pass (cached per sentence)."""
    return _trace(tr, tr.cache_key, result.source_ids, decoder_inputs(tr, result))


def computed_view(tr: Translator, result: Translation, choice: Choice) -> HeadView:
    """One head and query at one step: the sentence's trace cut to that step (moving the step runs nothing)."""
    return head_view(sentence_trace(tr, result).until(choice.step), choice.kind, choice.layer, choice.head, choice.query,
                     result.source_tokens, result.target_tokens[: choice.step + 1])


@st.cache_data(max_entries=64, show_spinner=False)
def _lens(_tr: Translator, checkpoint_key: str, source_ids: tuple[int, ...], target_ids: tuple[int, ...],
          step: int, chosen_id: int) -> LogitLens:
    return logit_lens(_tr.model, _trace(_tr, checkpoint_key, source_ids, target_ids), step, chosen_id)


def lens(tr: Translator, result: Translation, step: int) -> LogitLens:
    """Logit lens at `step`, ranking the token the model chose there (cached)."""
    return _lens(tr, tr.cache_key, result.source_ids, decoder_inputs(tr, result), step, result.steps[step].token_id)


@st.cache_data(max_entries=16, show_spinner=False)
def _rotation(_tr: Translator, checkpoint_key: str, n_positions: int, offset: int) -> RotationCheck:
    return rotation_check(model_positions(_tr.model, n_positions), offset, _tr.model.config.sinusoid)


def rotation(tr: Translator, n_positions: int, offset: int) -> RotationCheck:
    """Section 3.5's rotation check on this (sinusoidal) model's own table (cached)."""
    return _rotation(tr, tr.cache_key, n_positions, offset)


@st.cache_data(max_entries=16, show_spinner=False)
def _fit_errors(_tr: Translator, checkpoint_key: str, n_positions: int, offsets: tuple[int, ...]) -> dict[str, np.ndarray]:
    own = model_positions(_tr.model, n_positions)
    return {f"this model ({_tr.model.config.positional})": offset_errors(own, list(offsets)),
            "sinusoidal, same size": offset_errors(sinusoidal_table(n_positions, own.shape[1]).numpy(), list(offsets))}


def fit_errors(tr: Translator, n_positions: int, offsets: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Relative error of the best orthogonal offset map, this model's table next to sinusoids (cached)."""
    return _fit_errors(tr, tr.cache_key, n_positions, offsets)


def clamp(key: str, low: int, high: int, default: int) -> int:
    """Keep a number widget's stored value within its (model-dependent) range before drawing it."""
    value = min(max(state.stored(key, default), low), high)
    state.store(key, value)
    return value


def _select(label: str, options: list, key: str, default: object, **kwargs) -> object:
    """A selectbox whose value survives option changes (falls back to `default` when gone)."""
    if state.stored(key) not in options:
        state.store(key, default if default in options else options[0])
    return st.selectbox(label, options, key=key, **kwargs)


@dataclass(frozen=True)
class HeadChoice:
    """The sidebar's attention kind, layer and head as this page opens them (one head: never a mean)."""

    kind: Kind
    layer: int
    head: int
    mean: bool  # the sidebar says "mean of heads": `head` is head 0, shown in its place


def choose_head(tr: Translator, view: ViewState) -> HeadChoice:
    """Attention kind, layer and head: the sidebar's own values, shown and set here too (each picker is
    bound to the same session key as the sidebar's). Drawn outside the page's fragment, so a change
    reruns the whole app and the sidebar shows it at once."""
    c = tr.model.config
    cols = st.columns([3, 1, 2])
    with cols[0]:
        st.selectbox("Attention", list(KINDS), format_func=KIND_LABELS.get, **keep(state.KIND, "cross", state.INSIDE_KIND))
    selection.fit_to_model(view, c)
    n_layers = selection.n_layers(c, view.kind)
    with cols[1]:
        st.selectbox("Layer", list(range(n_layers)), **keep(state.LAYER, 0, state.INSIDE_LAYER))
    with cols[2]:
        st.selectbox("Head", [state.MEAN, *range(c.n_heads)], **keep(state.HEAD, state.MEAN, state.INSIDE_HEAD),
                     format_func=lambda h: "mean of heads (head 0 shown)" if h == state.MEAN else f"head {h}")
    head = selection.head(view, c.n_heads)
    if head is None:
        st.info("The sidebar's head is the mean of heads, which has no single computation to open: this page "
                "shows head 0. Pick a head here or in the sidebar to see another.", icon=":material/info:")
    return HeadChoice(view.kind, selection.fit_layer(view, n_layers), 0 if head is None else head, head is None)


def choose(view: ViewState, result: Translation, picked: HeadChoice) -> Choice:
    """The decoding step (shared with the Step page) and the query token of the picked head."""
    kind = picked.kind
    cols = st.columns(2)
    n_steps = len(result.steps)
    step = selection.fit_step(view, n_steps)
    state.set_step(step)
    with cols[0]:
        if n_steps > 1:
            step = int(st.slider("Decoding step", 0, n_steps - 1, help="Shared with the Step page.", **keep(state.STEP, step)))
    queries = result.source_tokens if kind == "encoder" else result.target_tokens[: step + 1]
    if kind != "encoder" and state.stored(state.INSIDE_QUERY_STEP) != step:
        state.store(state.inside_query(kind), step)  # a new step opens the token the decoder reads at it
    state.store(state.INSIDE_QUERY_STEP, step)
    with cols[1]:
        query = _select("Query token", list(range(len(queries))), state.inside_query(kind),
                        0 if kind == "encoder" else step, format_func=lambda i: f"{i}: {queries[i]}")
    return Choice(kind, picked.layer, picked.head, step, int(query))


def head_steps(tr: Translator, result: Translation, choice: Choice, picked: HeadChoice) -> None:
    """Sections 1-5 for the chosen head, step and query token. Its views are HTML (viz/inside.py says why)."""
    step = result.steps[choice.step]
    v = computed_view(tr, result, choice)
    read = " ".join(result.target_tokens[: choice.step + 1])
    st.markdown(f"**{KIND_LABELS[choice.kind]} · layer {choice.layer} · head {choice.head}** "
                f"{'(in place of the mean of heads)' if picked.mean else ''}  \n"
                f"**Step {choice.step}:** the decoder has read {plain(read)} and chose “{plain(step.token)}”. "
                f"**Query:** “{plain(v.query_tokens[v.query])}” (position {v.query}) · {len(v.key_tokens)} keys · "
                f"{v.n_heads} heads × d_k {v.q.size} = {v.concat.size} (d_model {v.attention_output.size})")
    st.subheader("1 · Where the vectors come from")
    st.html(inside.input_strips(v, embed_norm=tr.model.config.embed_norm))
    st.html(inside.key_input_strips(v))
    st.subheader("2 · Query, keys and their dot products")
    st.html(inside.qk_strips(v))
    st.html(inside.product_strips(v))
    steps = ["scale" if v.scale != 1.0 else "", "position bias" if v.bias is not None else "", "mask, softmax"]
    st.subheader("3 · " + ", ".join(s for s in steps if s).capitalize())
    st.html(inside.score_steps(v))
    st.caption(f"{score_terms(v)}The softmax of these terms, recomputed here, equals the weights the model computed "
               f"(max |Δ| = {np.abs(v.recomputed_weights - v.weights).max():.1e}), and those equal the row of the "
               f"attention heatmap recorded while translating, to float32 rounding (this page recomputes the sentence "
               f"in one teacher-forced pass): max |Δ| = {v.gap_to(result.attention):.1e}.")
    left, right = st.columns(2)
    with left:
        st.html(inside.mask_matrix(v))
    with right:
        st.html(inside.weight_bars(v))
    st.subheader("4 · What the head gives to the residual stream")
    st.html(inside.value_strips(v))
    st.html(inside.head_slices(v))
    st.html(inside.contribution_strips(v))
    st.html(inside.residual_strips(v))
    st.subheader(f"5 · Logit lens at step {choice.step}")
    st.html(lens_table(lens(tr, result, choice.step), tr.bundle.tgt_codec.piece))


def score_terms(v: HeadView) -> str:
    """What this model adds up before the softmax that the paper does not, in a sentence ("" for the paper's)."""
    unscaled = "This model leaves out the 1/√d_k (T5 folds it into its initialisation). " if v.scale == 1.0 else ""
    bias = ("The position bias is this head's learned number for the bucket of each key's offset from the query "
            "(the Positional page draws them all). ") if v.bias is not None else ""
    return unscaled + bias


def positional_panels(tr: Translator) -> None:
    """Section 3.5: an offset as a linear map of the positional encoding, checked on this model's table; for T5's
    relative positions, which add nothing to the embeddings, the bias they add to the scores instead."""
    c = tr.model.config
    if c.positional == "relative":
        st.subheader("6 · Positions: a bias on the scores, by offset (relative)")
        positional_page.relative_biases(tr)
        return
    st.subheader(f"6 · Positional encodings: offsets as rotations ({c.positional})")
    cols = st.columns(3)
    clamp(state.INSIDE_PE_POSITIONS, 8, c.max_len, min(64, c.max_len))
    n_pos = cols[0].slider("Positions", 8, c.max_len, key=state.INSIDE_PE_POSITIONS)
    clamp(state.INSIDE_PE_OFFSET, 1, n_pos - 1, 3)
    offset = cols[1].number_input("Offset k", 1, n_pos - 1, key=state.INSIDE_PE_OFFSET)
    if c.positional == "sinusoidal":
        clamp(state.INSIDE_PE_PAIR, 0, c.d_model // 2 - 1, 0)
        pair = cols[2].number_input("Frequency pair i", 0, c.d_model // 2 - 1, key=state.INSIDE_PE_PAIR)
        check = rotation(tr, n_pos, int(offset))
        st.caption(f"PE(t+{offset}) computed by rotating each (sin, cos) pair of PE(t) by ω_i·{offset}, against the "
                   f"model's own table for t < {n_pos - offset}: max error {check.max_error:.1e} (float32 rounding). "
                   f"{positional_page.LAYOUTS[c.sinusoid]}")
        left, right = st.columns(2)
        with left:
            widgets.chart(rotation_circle(check, int(pair)), "inside-rotation")
        with right:
            widgets.chart(rotation_errors(check), "inside-rotation-errors")
    offsets = tuple(range(1, min(16, n_pos - 1) + 1))
    widgets.chart(offset_fit_curves(offsets, fit_errors(tr, n_pos, offsets)), "inside-offset-fit")
    if c.positional == "learned":
        own, sinusoid = fit_errors(tr, n_pos, (int(offset),)).values()
        st.caption(f"Learned encodings have no formula: the curve is the best rotation (orthogonal map) fitted by "
                   f"least squares for each offset, next to sinusoids of the same size, where it is exact. "
                   f"Offset {offset}: relative error {float(own[0]):.2f} here, {float(sinusoid[0]):.1e} for sinusoids.")
