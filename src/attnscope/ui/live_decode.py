"""A translation shown as it decodes: each token and its attention row as soon as the model has chosen it (a beam
search's best hypothesis so far after each step), a Stop button that keeps what was decoded, and for a large budget,
before it starts, the time it may take.

The decode is a stream (`TranslationStream`, or `BeamStream` for a beam above 1) kept in the session while it runs.
A click on Stop (or any other widget) makes Streamlit rerun the page, which ends this run at its next redraw; the
stream, which holds the model only for each step, waits in the session. The next run goes on with it where it was,
or, when Stop asked for the rerun, takes what it decoded as the result: a complete record of those tokens, marked
stopped, that every page of this session shows (other sessions asking for the same translation decode it themselves)
until the user decodes it again.
"""
from __future__ import annotations

import threading
import time
from typing import Hashable

import streamlit as st

from attnscope.engine.decoding.beam_streaming import BeamStream
from attnscope.engine.decoding.streaming import TranslationStream
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.ui import state
from attnscope.ui.query import Query
from attnscope.viz.live import LIVE_ROWS, LiveProgress, estimate, live_html

LIVE_DECODE, STOP_DECODE = state.Key("_live_decode"), state.Key("_stop_decode")  # (name, stream) decoding; Stop's name
STOPPED_DECODE = state.Key("_stopped_decode")  # (name, Translation): the translation this session stopped
STOP_BUTTON = state.Key("stop_decoding")
LARGE_BUDGET = 100  # output tokens from which the time a decode may take is said before it starts
REDRAW_S = 0.1  # the live view is redrawn at most this often (the first token at once)
SMOOTHING = 0.5  # weight of the latest decode in a model's measured cost per token
MEASURED = 8  # output tokens a decode needs to measure its model's cost per token (fewer: the first steps' warm-up)


class TokenCosts:
    """Seconds per output token of each model (by `cost_key`: a beam size apart, as seconds per step), measured on this
    server by its latest decodes."""

    def __init__(self) -> None:
        self._costs: dict[str, float] = {}
        self._lock = threading.Lock()

    def get(self, model: str) -> float | None:
        with self._lock:
            return self._costs.get(model)

    def add(self, model: str, per_token: float) -> None:
        with self._lock:
            before = self._costs.get(model)
            self._costs[model] = per_token if before is None else SMOOTHING * per_token + (1 - SMOOTHING) * before


@st.cache_resource(show_spinner=False)
def token_costs() -> TokenCosts:
    """The server's one TokenCosts (a Streamlit resource: shared by every session)."""
    return TokenCosts()


def cost_key(tr: Translator, beam: int) -> str:
    """Whose cost per token (TokenCosts) a decode measures and is estimated by: the model's, per beam size (a beam of
    k runs k hypotheses a step)."""
    return tr.cache_key if beam == 1 else f"{tr.cache_key} beam {beam}"


def decode_live(tr: Translator, query: Query, name: Hashable) -> Translation:
    """The translation of `query` (named `name`) shown as it decodes (greedy: token by token; a beam: its best
    hypothesis after each step); stopped, what was decoded. Raises InputError for bad input, before any decoding."""
    live = state.stored(LIVE_DECODE)
    stream: TranslationStream | BeamStream | None = live[1] if live is not None and live[0] == name else None
    stop = state.forget(STOP_DECODE) == name  # a Stop clicked as its decode ended finds no stream: ignored
    if stream is None:
        stream, stop = tr.stream(query.sentence, max_len=query.max_len, rules=query.rules,
                                 task_prefix=query.task_prefix, beam_size=query.beam), False
        state.store(LIVE_DECODE, (name, stream))
    if not stop:
        _follow(tr, stream, name, query.beam)
    state.forget(LIVE_DECODE)
    result = stream.result()
    if stream.decoded >= MEASURED:
        token_costs().add(cost_key(tr, query.beam), stream.per_token)
    if result.stopped:
        state.store(STOPPED_DECODE, (name, result))
    return result


def stopped(name: Hashable) -> Translation | None:
    """The translation named `name` as this session stopped it, or None."""
    kept = state.stored(STOPPED_DECODE)
    return kept[1] if kept is not None and kept[0] == name else None


def decode_again() -> None:
    """Forget this session's stopped translation: the next run decodes it in full."""
    state.forget(STOPPED_DECODE)


def _follow(tr: Translator, stream: TranslationStream | BeamStream, name: Hashable, beam: int) -> None:
    """Decode `stream` to its end, redrawing the live view as tokens come, with Stop beside it."""
    cost = token_costs().get(cost_key(tr, beam))
    note, stop, view = st.empty(), st.empty(), st.empty()
    if stream.budget >= LARGE_BUDGET and cost is not None:
        note.caption(estimate(stream.budget, cost, beam))
    kept = "what was decoded so far" if beam == 1 else "the beam search's best hypothesis so far"
    stop.button("Stop", key=STOP_BUTTON, icon=":material/stop_circle:", on_click=state.store,
                args=(STOP_DECODE, name), help=f"Stop decoding here: every page shows {kept}.")
    source, drawn = stream.source_tokens, 0.0
    if stream.steps:  # a stream a rerun interrupted: what it had decoded shows again at once
        view.html(_live(stream, source, beam))
    for _ in stream:
        if time.perf_counter() - drawn >= REDRAW_S or stream.finished:
            view.html(_live(stream, source, beam))
            drawn = time.perf_counter()
    for slot in (note, stop, view):
        slot.empty()


def _live(stream: TranslationStream | BeamStream, source: list[str], beam: int) -> str:
    """The live view of `stream` as decoded so far: the latest rows of the last layer's mean of heads."""
    tokens, rows = stream.live(LIVE_ROWS)
    return live_html(stream.text, source, tokens, rows,
                     LiveProgress(stream.decoded, stream.budget, stream.seconds, stream.per_token or 0.0, beam))
