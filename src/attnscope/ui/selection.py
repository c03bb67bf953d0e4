"""The sidebar's selection (attention kind, layer, head): one place that reads and fits it to a model,
and the Translate page's kind tabs bound to it."""
from __future__ import annotations

from typing import Any, Sequence

import streamlit as st

from attnscope.records.attention import KIND_LABELS, KINDS, AttentionRecord, Kind


def kind() -> Kind:
    """The selected kind of attention (the sidebar's radio and the Translate page's tabs share it)."""
    value = st.session_state.get("kind", "cross")
    return value if value in KINDS else "cross"


def head() -> int | None:
    """The selected head, or None for the mean of heads."""
    value = st.session_state.get("head", "mean")
    return None if value == "mean" else int(value)


def fit_layer(n_layers: int) -> int:
    """The selected layer, clamped to a model with `n_layers` layers (a smaller model may be active)."""
    return max(0, min(int(st.session_state.get("layer", 0)), n_layers - 1))


def layer(record: AttentionRecord, of_kind: Kind) -> int:
    """The selected layer as it exists for one kind of attention in `record`."""
    return fit_layer(record.n_layers(of_kind))


def _tab_to_kind() -> None:
    label = st.session_state.get("_w_kind_tab")
    st.session_state["kind"] = next((k for k in KINDS if KIND_LABELS[k] == label), "cross")


def kind_tabs() -> Sequence[Any]:
    """One tab per kind of attention, opened on session_state['kind'] (which the sidebar radio and the
    URL's `kind` also show and set); choosing a tab sets it, so every view agrees on one kind."""
    current = kind()
    st.session_state["_w_kind_tab"] = KIND_LABELS[current]
    return st.tabs([KIND_LABELS[k] for k in KINDS], key="_w_kind_tab", on_change=_tab_to_kind)
