"""Shareable URLs: the view (sentence, checkpoint, kind, layer, head, step, beam size, maximum length, the forced
token) read from and written to the URL. A page's tabs keep their own parameter (`st.tabs(bind="query-params")`).

`max_len` is a plain number of tokens; absent, the page's default applies."""
from __future__ import annotations

from typing import Any, Sequence

import streamlit as st

from attnscope.engine.decoding.translator import MAX_BEAM
from attnscope.records.attention import KINDS
from attnscope.ui import state

URL_KEYS = state.VIEW_KEYS  # each is the URL parameter of the same name
RESTORED = state.Key("_url_restored")  # this session's URL was read


def restore_from_url() -> None:
    """On a session's first run, copy shareable view state from the URL into the session's view."""
    if state.stored(RESTORED):
        return
    state.store(RESTORED, True)
    params = st.query_params
    if state.SENTENCE in params:
        state.set_sentence(params[state.SENTENCE][:2000])
    if params.get(state.CHECKPOINT):
        state.set_checkpoint(params[state.CHECKPOINT][:200])  # the sidebar says so if it is not available
    if params.get(state.KIND) in KINDS:
        state.set_kind(params[state.KIND])
    if params.get(state.LAYER, "").isdigit():
        state.set_layer(int(params[state.LAYER]))
    if params.get(state.STEP, "").isdigit():
        state.set_step(int(params[state.STEP]))
    if params.get(state.BEAM, "").isdigit() and 1 <= int(params[state.BEAM]) <= MAX_BEAM:
        state.set_beam(int(params[state.BEAM]))
    if params.get(state.MAX_LEN, "").isdigit() and int(params[state.MAX_LEN]) >= 1:
        state.set_max_len(int(params[state.MAX_LEN]))  # the decoding options fit it to the model's limit
    if params.get(state.FORCE):
        state.store(state.URL_FORCE, params[state.FORCE][:100])  # the Step page's what-if fills its boxes with it
    head = params.get(state.HEAD, "")
    if head == state.MEAN or head.isdigit():
        state.set_head(None if head == state.MEAN else int(head))


def write_url(keys: tuple[str, ...] = URL_KEYS) -> None:
    """Mirror the current view into the URL so it can be shared or bookmarked."""
    for key in keys:
        value = state.stored(key)
        if value is None or value == "":
            st.query_params.pop(key, None)
        elif st.query_params.get(key) != str(value):
            st.query_params[key] = str(value)


def tabs_in_url(labels: Sequence[str], key: str, **options: Any) -> Sequence[Any]:
    """A page's tabs, the open one kept in the URL under `key` (`st.tabs` bound to the query parameter; `options`
    go to st.tabs, e.g. on_change="rerun" for a page that computes only its open tab).

    Switching a bound tab reruns the page at once, while this run may still be drawing a table below the tabs;
    a first import of pandas there would race the new run, which is why app.py imports the heavy libraries
    before any page (ui/preload.py).
    """
    return st.tabs(list(labels), key=key, bind="query-params", **options)
