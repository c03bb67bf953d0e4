"""Widget values that survive page switches (Streamlit drops the state of widgets not drawn in a run)."""
from __future__ import annotations

from attnscope.ui import state


def keep(key: str, default: object, widget: str | None = None) -> dict[str, object]:
    """Widget kwargs whose value survives page switches.

    The value lives under `key`; the widget uses a shadow key (`widget`, default state.shadow(key)) and copies
    back on change, so two widgets with their own shadow keys (the sidebar's and a page's) show and set
    one value.
    """
    widget = widget or state.shadow(key)
    value = state.stored(key, default)
    state.store(key, value)
    state.store(widget, value)
    return {"key": widget, "on_change": _copy_back, "args": (key, widget)}


def _copy_back(key: str, widget: str) -> None:
    state.store(key, state.stored(widget))
