"""The attention explorer on a page: one sentence's attention sent to the browser once, every look answered there.

The component (st.components.v2, inline CSS and JS from ui/assets/explorer, no iframe, no build step) draws
viz/explorer.py's payload on canvas: kind, layer, head or mean of heads, the all-heads grid, the decoding steps,
hover and zoom need no server rerun. What the user picks comes back as the component's "view" state at once; its
callback stores it as the session's view (before the next run draws the sidebar), so the sidebar, the other pages
and the URL follow, while the explorer never waits for them.

The payload opens on a selection; it is changed only when the view was changed elsewhere (the sidebar, the URL,
another page), never to echo what the explorer reported. So the bytes of a rerun that follows a click are the
bytes already sent, which Streamlit does not send again (its message cache), and the browser keeps its own view.

The component sits in a fragment of its own: a layer that a long sentence's payload lacks is asked for at once (the
"fetch" state) and answered by rerunning the explorer alone, not the page around it; a reported pick reruns the
whole app (the sidebar, the URL and the page follow), after the user pauses.
"""
from __future__ import annotations

import hashlib
from importlib.resources import files
from typing import Callable, Hashable, Sequence

import streamlit as st

from attnscope.records.attention import KINDS, AttentionRecord, DecodeStep, Kind
from attnscope.ui import selection, state
from attnscope.ui.state import ViewState
from attnscope.viz.explorer import Compared, Selection, payload, present_layers
from attnscope.viz.labels import WEIGHT

_ASSETS = files("attnscope.ui") / "assets" / "explorer"
JS_PARTS = (  # one module, in this order
    "base.js",
    "cells.js",
    "explorer.js",
    "heatmap.js",
    "step.js",
    "compare.js",
    "inside.js",
    "strips.js",
    "sections.js",
    "atlas.js",
    "atlas_head.js",
)
_explorer = st.components.v2.component(
    "attnscope_explorer", html="", css=(_ASSETS / "explorer.css").read_text("utf-8"),
    js="\n".join((_ASSETS / part).read_text("utf-8") for part in JS_PARTS))
UNBOUNDED = 1 << 30  # steps: a reported view is kept as it is (a payload clamps it to its sentence)
KEYBOARD = ("←/→ step · ↑/↓ head (mean first) · PgUp/PgDn layer · e/d/c encoder, decoder or cross-attention · "
            "space play/pause (Step page) · +/− zoom · [ / ] query token (Inside one head)")


def selection_of(view: ViewState, n_steps: int) -> Selection:
    """The session's view as the explorer opens it (the step kept within the sentence's `n_steps`)."""
    return Selection(view.kind, view.layer, view.head, selection.fit_step(view, max(n_steps, 1)))


def view_id(name: Hashable) -> str:
    """A short stable id for what a payload shows (the browser keeps its own selection while it stays)."""
    return hashlib.sha1(repr(name).encode("utf-8")).hexdigest()[:16]


def _follow(key: str) -> None:
    """The component's callback: what the user picked in the browser becomes the session's view."""
    picked = state.component_value(key, "view")
    if not isinstance(picked, dict):
        return
    state.store(state.explorer_follow(key), True)
    if picked.get("kind") in KINDS:
        state.set_kind(picked["kind"])
    for name, setter in (("layer", state.set_layer), ("step", state.set_step)):
        if isinstance(picked.get(name), int):
            setter(picked[name])
    head = picked.get("head")
    if head is None or isinstance(head, int):
        state.set_head(head)
    if isinstance(picked.get("query"), int):  # Inside one head's query token, kept per kind
        state.store(state.inside_query(state.read().kind), picked["query"])
    state.store(state.explorer_reported(key), selection_of(state.read(), UNBOUNDED))  # the view as it now is


def opened_on(key: str, name: str, current: Selection) -> tuple[Selection, int]:
    """The selection the explorer `key` showing `name` opens on, and how many times it was opened anew: the last one
    sent, unless the view now differs from what the explorer shows (the selection it last reported, else the one it
    was sent): then the view's, under a new count (so the browser follows even a selection it was sent before)."""
    sent = state.stored(state.explorer_sent(key))
    reported = state.stored(state.explorer_reported(key))
    shown = reported if reported is not None else None if sent is None else sent[1]
    if sent is None or sent[0] != name or current != shown:
        sent = (name, current, 0 if sent is None else sent[2] + 1)
        state.store(state.explorer_sent(key), sent)
        state.forget(state.explorer_reported(key))  # it shows what it is sent now
    return sent[1], sent[2]


def explorer(record: AttentionRecord, view: ViewState, name: Hashable, key: str, *,
             steps: Sequence[DecodeStep] | None = None, output_tokens: Sequence[str] | None = None,
             mode: str = "heatmap", value: str = WEIGHT, per_head_scale: bool = False, kind: Kind | None = None,
             title: str = "", other: Compared | None = None, caption: bool = True) -> None:
    """Mount the explorer on `record` (named by `name`: model, sentence, decoding settings, values), opened on the
    session's view; `key` tells one explorer on a page from another. A "map" (`mode`) shows one `kind` alone,
    titled `title`; a "compare" sets `other` beside it; `caption` says what the explorer answers and its keys (once
    per page is enough)."""
    current, identity = selection_of(view, record.n_steps), view_id(name)
    opened, epoch = opened_on(key, identity, current)

    def data(fetched: int | None) -> bytes:
        layer = current.layer if fetched is None else fetched

        def build() -> bytes:
            return payload(record, view_id=identity, selection=opened, epoch=epoch, steps=steps,
                           output_tokens=output_tokens, mode=mode, value=value, per_head_scale=per_head_scale,
                           layer=layer, kind=kind, title=title, other=other)

        if other is not None:  # what B is, is not all in the name
            return build()
        layers = tuple((k, tuple(v)) for k, v in present_layers(record, layer).items())
        return _built(identity, tuple(opened.as_dict().items()), epoch, layers, (mode, value, per_head_scale, kind, title),
                      build)

    mount(key, data, caption)


@st.cache_resource(max_entries=8, ttl=600, show_spinner=False)  # shared: Inside one head's can be ~30 MB a layer
def _built(identity: str, selection: tuple, epoch: int, layers: tuple, options: tuple, _build: Callable[[], bytes]) -> bytes:
    """A payload's bytes, built once for what they show (`identity` names the record, its steps and values): the
    reruns that follow picks, and a long sentence's layer fetched again, lay out and encode nothing (a 400-token
    output's layer: ~25 ms of weights and JSON each time)."""
    return _build()


@st.fragment
def mount(key: str, data: Callable[[int | None], bytes], caption: bool = True) -> None:
    """The component on `data(layer)` (a payload of viz/explorer.py or viz/inside.py; `layer` the one the browser
    asked for, None: the view's). What the user picks becomes the session's view (_follow); a fragment, so a layer
    asked for reruns it alone, and a reported pick reruns the whole app. `caption` says what it answers and its keys."""
    if state.forget(state.explorer_follow(key)):  # a pick was reported: the sidebar, the URL and the page follow
        st.rerun()
    asked = state.component_value(key, "fetch")
    fetched = None
    if isinstance(asked, dict) and isinstance(asked.get("layer"), int) and asked != state.stored(state.explorer_fetched(key)):
        state.store(state.explorer_fetched(key), asked)  # served once: later runs open the view's layer again
        fetched = asked["layer"]
    _explorer(key=key, data=data(fetched), on_view_change=lambda: _follow(key), on_fetch_change=lambda: None)
    if caption:
        st.caption(f"Every look is answered in your browser. Keyboard (click the explorer first): {KEYBOARD}. Hover "
                   "shows the value the model recorded (float32, 7 significant digits).")


def atlas_explorer(data: bytes, key: str, on_open: Callable[[], None]) -> None:
    """Mount the explorer on a head atlas's payload (viz/atlas.py); `on_open` runs when a point is clicked (its
    sentence, kind, layer, head and step are the component's "open" value)."""
    _explorer(key=key, data=data, on_view_change=lambda: None, on_open_change=on_open)
