"""Widget values that survive page switches (Streamlit drops the state of widgets not drawn in a run)."""
from __future__ import annotations

import streamlit as st


def keep(key: str, default: object, widget: str | None = None) -> dict[str, object]:
    """Widget kwargs whose value survives page switches.

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
