"""Shared app state: cached models and results, sidebar selections, shareable URLs."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import streamlit as st

from attnscope.checkpoints import checkpoint, registry
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.registry import default_checkpoint, shipped_dir
from attnscope.engine.record import KIND_LABELS, KINDS
from attnscope.engine.translator import InputError, Translation, Translator
from attnscope.ui.text import plain

EXAMPLES = (
    "A little girl climbs into a wooden playhouse.",
    "Two dogs are running through the snow.",
    "A man in a blue shirt is playing the guitar on the street.",
    "The woman with the red hat is reading a book in the park.",
)
URL_KEYS = ("sentence", "checkpoint", "kind", "layer", "head", "step")


@st.cache_resource(max_entries=64, show_spinner=False)
def _entry(path: str, mtime: float, origin: str) -> registry.Entry:
    return registry.entry(Path(path), origin)  # type: ignore[arg-type]


def entries() -> dict[str, registry.Entry]:
    """Every checkpoint this session can use: shipped (default first), shared user models, own uploads."""
    found: dict[str, registry.Entry] = {}
    folders = [(shipped_dir(), "shipped"), (registry.user_dir(), "user")]
    session = st.session_state.get("session_models_dir")
    if session:
        folders.append((Path(session), "session"))
    default = default_checkpoint().stem
    for folder, origin in folders:
        paths = sorted(folder.glob("*.safetensors"), key=lambda p: p.stem != default) if folder.is_dir() else []
        for path in paths:
            if path.stem in found:
                continue
            try:
                found[path.stem] = _entry(str(path), path.stat().st_mtime, origin)
            except (CheckpointError, OSError):
                continue  # listed with its problem on the Checkpoints page
    return found


def available_checkpoints() -> dict[str, Path]:
    """Checkpoints the user can pick, by display name (file stem), default first."""
    return {name: e.path for name, e in entries().items()}


@st.cache_resource(max_entries=6, show_spinner="Loading the model…")
def _load(path: str, mtime: float) -> Translator:
    model, bundle = checkpoint.load(path)
    return Translator(model, bundle, label=Path(path).stem, revision=mtime)


def translator(name: str | None = None) -> Translator | None:
    """The translator of the named (default: active) checkpoint, or None with an error shown."""
    choices = available_checkpoints()
    name = name or st.session_state.get("checkpoint") or next(iter(choices), None)
    if name not in choices:
        st.error(f"No checkpoint named {plain(repr(name))}. Available: {plain(', '.join(choices) or 'none')}.")
        return None
    path = choices[name]
    try:
        return _load(str(path), path.stat().st_mtime)
    except CheckpointError as err:
        st.error(f"Could not load {plain(name)}: {plain(err)}")
        return None


@st.cache_data(max_entries=64, show_spinner="Translating…")
def _translate(_translator: Translator, checkpoint_key: str, text: str, beam: int, max_len: int | None) -> Translation:
    return _translator.translate(text, beam_size=beam, max_len=max_len)


def translate(tr: Translator, text: str, beam: int = 1, max_len: int | None = None) -> Translation | None:
    """Cached translation with every head captured; None (and a message) for bad input."""
    try:
        return _translate(tr, tr.cache_key, text, beam, max_len)
    except InputError as err:
        st.warning(plain(err))
        return None


@st.cache_data(max_entries=64, show_spinner="Decoding the forced branch…")
def _force(_translator: Translator, checkpoint_key: str, text: str, prefix: tuple[int, ...], max_len: int | None) -> Translation:
    return _translator.translate(text, max_len=max_len, prefix=prefix)


def force(tr: Translator, text: str, prefix: tuple[int, ...], max_len: int | None = None) -> Translation | None:
    """Greedy continuation after forcing `prefix` (cached)."""
    try:
        return _force(tr, tr.cache_key, text, prefix, max_len)
    except InputError as err:
        st.warning(plain(err))
        return None


@st.cache_data(max_entries=64, show_spinner="Scoring…")
def _score(_translator: Translator, checkpoint_key: str, text: str, reference: str) -> Translation:
    return _translator.score(text, reference)


def score(tr: Translator, text: str, reference: str) -> Translation | None:
    """Teacher-forced record of `reference` (cached)."""
    try:
        return _score(tr, tr.cache_key, text, reference)
    except InputError as err:
        st.warning(plain(err))
        return None


@st.cache_data(max_entries=64, show_spinner=False)
def _hypothesis(_translator: Translator, checkpoint_key: str, text: str, ids: tuple[int, ...]) -> Translation:
    return _translator.hypothesis(text, ids)


def hypothesis(tr: Translator, text: str, ids: tuple[int, ...]) -> Translation:
    """Teacher-forced record of a given output, e.g. one beam hypothesis (cached)."""
    return _hypothesis(tr, tr.cache_key, text, ids)


def keep(key: str, default: object, widget: str | None = None) -> dict[str, object]:
    """Widget kwargs whose value survives page switches (Streamlit drops state of unrendered widgets).

    The value lives under `key`; the widget uses a shadow key (`widget`, default "_w_" + key) and copies
    back on change, so two widgets with their own shadow keys (the sidebar's and a page's) show and set
    one value.
    """
    widget = widget or "_w_" + key
    st.session_state.setdefault(key, default)
    st.session_state[widget] = st.session_state[key]
    return {"key": widget, "on_change": _copy_back, "args": (key, widget)}


def _copy_back(key: str, widget: str) -> None:
    st.session_state[key] = st.session_state[widget]


def fit_checkpoint(choices: Sequence[str]) -> str | None:
    """Keep session_state['checkpoint'] among `choices`; say why when the chosen one has gone.

    Another session can delete a shared user model, and an uploaded model lives only as long as the
    session that uploaded it (a reload, or a shared link, starts a new session without it).
    """
    wanted = st.session_state.get("checkpoint")
    if wanted in choices:
        return None
    st.session_state["checkpoint"] = choices[0]
    if wanted is None:
        return None
    return (f"The checkpoint {plain(repr(wanted))} is no longer available: it was deleted, or it was uploaded in an "
            f"earlier session (uploads last only until the page is reloaded). Showing {plain(choices[0])} instead.")


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


def _tab_to_kind() -> None:
    label = st.session_state.get("_w_kind_tab")
    st.session_state["kind"] = next((k for k in KINDS if KIND_LABELS[k] == label), "cross")


def kind_tabs() -> Sequence[Any]:
    """One tab per kind of attention, opened on session_state['kind'] (which the sidebar radio and the
    URL's `kind` also show and set); choosing a tab sets it, so every view agrees on one kind."""
    kind = st.session_state.get("kind", "cross")
    st.session_state["_w_kind_tab"] = KIND_LABELS[kind if kind in KINDS else "cross"]
    return st.tabs([KIND_LABELS[k] for k in KINDS], key="_w_kind_tab", on_change=_tab_to_kind)
