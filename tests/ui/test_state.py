"""ui.state: the view a run reads from the session, and the setters that write it, in a script of their own."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.support import CEILING


def _script() -> None:
    import streamlit as st

    from attnscope.ui import state

    st.text(repr(state.read()))
    if st.session_state.get("write"):
        state.set_head(None)
        state.set_step(4)
        state.set_force(None)


def _view(app: AppTest) -> str:
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app.text[0].value


def test_a_new_session_reads_the_defaults() -> None:
    from attnscope.ui.state import ViewState

    assert _view(AppTest.from_function(_script, default_timeout=CEILING)) == repr(ViewState())


def test_stored_values_are_read_as_typed_fields_and_the_setters_write_them() -> None:
    from attnscope.ui.state import ViewState

    app = AppTest.from_function(_script, default_timeout=CEILING)
    for key, value in {"sentence": "a b", "kind": "sideways", "layer": 2, "head": 3, "force": "", "max_len": 7}.items():
        app.session_state[key] = value
    assert _view(app) == repr(ViewState(sentence="a b", kind="cross", layer=2, head=3, max_len=7))
    app.session_state["write"] = True
    _view(app)
    assert (app.session_state["head"], app.session_state["step"], app.session_state["force"]) == ("mean", 4, None)
    assert _view(app) == repr(ViewState(sentence="a b", layer=2, head=None, step=4, max_len=7))
