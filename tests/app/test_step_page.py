"""AppTest journeys on the step-through page."""
from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from tests.support import shown


def open_step_page(app: AppTest, sentence: str = "a b c d") -> AppTest:
    app.session_state["sentence"] = sentence
    app.run()
    return app.switch_page("pages/step.py").run()


def topk_title(app: AppTest) -> str:
    for chart in app.get("plotly_chart"):
        title = json.loads(chart.proto.spec)["layout"]["title"]["text"]
        if title.startswith("Step "):
            return title
    raise AssertionError("no top-k chart")


def test_next_button_and_slider_move_the_step(app: AppTest) -> None:
    open_step_page(app)
    assert topk_title(app).startswith("Step 0: chose “d”")
    app.button(key="next").click().run()
    assert app.session_state["step"] == 1
    assert topk_title(app).startswith("Step 1: chose “c”")
    app.slider(key="_w_step").set_value(3).run()
    assert topk_title(app).startswith("Step 3: chose “a”")
    app.button(key="prev").click().run()
    assert topk_title(app).startswith("Step 2")


def test_forcing_a_token_changes_the_continuation(app: AppTest) -> None:
    open_step_page(app)
    assert app.session_state["step"] == 0
    app.text_input(key="force_typed").set_value("b").run()
    assert not app.exception
    texts = [shown(m) for m in app.markdown]
    assert "**Model's choice:** d c b a" in texts
    forced = next(t for t in texts if t.startswith("**Forced branch:**"))
    assert forced.startswith("**Forced branch:** b") and forced != "**Forced branch:** d c b a"


def test_rival_candidate_is_forced(app: AppTest) -> None:
    open_step_page(app)
    box = app.selectbox(key="force_choice")
    assert not {"<pad>", "<bos>"} & set(box.options)
    rival = next(tok for tok in box.options if not tok.startswith("<"))
    box.set_value(rival).run()
    forced = next(shown(m) for m in app.markdown if shown(m).startswith("**Forced branch:**"))
    assert forced.startswith(f"**Forced branch:** {rival}")


def test_beam_mode_shows_the_tree(app: AppTest) -> None:
    app.session_state["beam"] = 3
    open_step_page(app)
    assert not app.exception
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in app.get("plotly_chart")]
    assert any(t.startswith("Beam search tree") for t in titles)
    assert app.selectbox(key="hypothesis").options


def test_url_step_is_restored(app: AppTest) -> None:
    app.query_params["sentence"] = "a b c d"
    app.query_params["step"] = "2"
    app.run()
    app.switch_page("pages/step.py").run()
    assert topk_title(app).startswith("Step 2")
