"""A checkpoint that disappears (deleted elsewhere, or an upload lost to a reload) is named, not silently replaced."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.support import page_script, shown


def test_a_deleted_model_is_reported_with_the_fallback(app: AppTest) -> None:
    app.session_state["checkpoint"] = "my-deleted-model"
    app.run()
    assert not app.exception
    (warning,) = [shown(w) for w in app.sidebar.warning]
    assert "my-deleted-model" in warning and "Showing toy-reverse instead" in warning
    assert app.session_state["checkpoint"] == "toy-reverse"


def test_a_shared_link_to_an_upload_says_it_is_gone(app: AppTest) -> None:
    app.query_params["checkpoint"] = "uploaded-yesterday"
    app.run()
    assert any("uploads last only until the page is reloaded" in shown(w) for w in app.sidebar.warning)


def test_the_upload_box_says_uploads_last_one_session(app: AppTest) -> None:
    app.run()
    app.switch_page(page_script("Checkpoints")).run()
    assert any("reloading the page" in shown(c) for c in app.caption)
