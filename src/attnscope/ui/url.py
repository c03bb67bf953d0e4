"""Shareable URLs: the view (sentence, checkpoint, kind, layer, head, step, beam size, maximum length, the forced
token) read from and written to the URL. A page's tabs keep their own parameter (`st.tabs(bind="query-params")`).

`max_len` is a plain number of tokens; absent, the page's default applies."""
from __future__ import annotations

from typing import Any, Sequence

import streamlit as st

from attnscope.engine.decoding.translator import MAX_BEAM
from attnscope.records.attention import KINDS

URL_KEYS = ("sentence", "checkpoint", "kind", "layer", "head", "step", "beam", "max_len", "force")


def restore_from_url() -> None:
    """On a session's first run, copy shareable view state from the URL into session_state."""
    if st.session_state.get("_url_restored"):
        return
    st.session_state["_url_restored"] = True
    params = st.query_params
    if "sentence" in params:
        st.session_state["sentence"] = params["sentence"][:2000]
    if params.get("checkpoint"):
        st.session_state["checkpoint"] = params["checkpoint"][:200]  # the sidebar says so if it is not available
    if params.get("kind") in KINDS:
        st.session_state["kind"] = params["kind"]
    for key in ("layer", "step"):
        if params.get(key, "").isdigit():
            st.session_state[key] = int(params[key])
    if params.get("beam", "").isdigit() and 1 <= int(params["beam"]) <= MAX_BEAM:
        st.session_state["beam"] = int(params["beam"])
    if params.get("max_len", "").isdigit() and int(params["max_len"]) >= 1:
        st.session_state["max_len"] = int(params["max_len"])  # the decoding options fit it to the model's limit
    if params.get("force"):
        st.session_state["_url_force"] = params["force"][:100]  # the Step page's what-if fills its boxes with it
    head = params.get("head", "")
    if head == "mean" or head.isdigit():
        st.session_state["head"] = "mean" if head == "mean" else int(head)


def write_url(keys: tuple[str, ...] = URL_KEYS) -> None:
    """Mirror the current view into the URL so it can be shared or bookmarked."""
    for key in keys:
        value = st.session_state.get(key)
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
