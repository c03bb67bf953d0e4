"""AppTest journeys on the Inside-one-head page (toy reverse model: "a b c d" -> "d c b a")."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import APP
from tests.support import CEILING, HtmlView, explorers, html_views, shown, shown_deltas

PAGE = "pages/inside.py"


def open_inside(app: AppTest, sentence: str = "a b c d") -> AppTest:
    app.session_state["sentence"] = sentence
    app.run()
    return app.switch_page(PAGE).run()


def open_positions(app: AppTest) -> AppTest:
    """The page's second tab: the positional panels (drawn only while their tab is open)."""
    app.session_state["inside_tab"] = "6 · Positional encodings (section 3.5)"
    return app.run()


def view(app: AppTest, title_start: str) -> HtmlView:
    """The head's HTML view whose title starts with `title_start`."""
    for title, found in html_views(app).items():
        if title.startswith(title_start):
            return found
    raise AssertionError(f"no view titled {title_start!r}")


def chart_titled(app: AppTest, title_start: str) -> dict:
    """The plotly chart (positional panels) whose title starts with `title_start`."""
    for chart in app.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if spec["layout"].get("title", {}).get("text", "").replace("<br>", " ").startswith(title_start):
            return spec
    raise AssertionError(f"no chart titled {title_start!r}")


def test_page_shows_every_panel_and_the_row_matches_the_recording(app: AppTest) -> None:
    open_inside(app)
    assert not app.exception, [e.value for e in app.exception]
    assert len(app.get("html")) == 13 and not app.get("plotly_chart")  # the note and the head's views only
    delta = next(shown(c) for c in app.caption if "max |Δ|" in shown(c))
    assert len(shown_deltas(delta)) == 2 and max(shown_deltas(delta)) <= 1e-6, delta  # recomputed and recorded rows
    for start in ("Eq. 1", "MultiHead = Concat", "Concat·W^O", "Residual + LayerNorm", "Logit lens"):
        view(app, start)
    open_positions(app)
    assert not app.exception and len(app.get("plotly_chart")) == 3 and len(html_views(app)) == 0
    chart_titled(app, "Section 3.5")


def test_decoder_self_head_at_step_2_and_the_step_is_shared(app: AppTest) -> None:
    open_inside(app)
    app.selectbox(key="inside_kind").set_value("decoder").run()
    app.slider(key="_w_step").set_value(2).run()
    assert app.session_state["step"] == 2
    assert app.selectbox(key="inside_query_decoder").value == 2  # the token the decoder reads at step 2
    app.selectbox(key="inside_head").set_value(1).run()
    assert not app.exception
    text = " ".join(shown(m) for m in app.markdown)
    assert "**Step 2:** the decoder has read <bos> d c and chose “b”" in text
    assert "**Query:** “c” (position 2)" in text
    scores = view(app, "Eq. 1").body_rows()
    assert [len(row.texts) for row in scores] == [3] * 4  # keys <bos> d c
    mask = view(app, "Mask M")
    assert "causal" in mask.title
    assert np.array_equal([[t == "−∞" for t in row.texts] for row in mask.body_rows()], np.triu(np.ones((3, 3)), 1))
    assert "“b”" in view(app, "Logit lens at step 2").title
    app.switch_page("pages/step.py").run()
    assert app.session_state["step"] == 2


@pytest.mark.parametrize("kind", ["encoder", "cross"])
def test_encoder_and_cross_attention_open_without_a_mask(app: AppTest, kind: str) -> None:
    open_inside(app)
    app.selectbox(key="inside_kind").set_value(kind).run()
    app.slider(key="_w_step").set_value(2).run()
    app.selectbox(key="inside_query_" + kind).set_value(1).run()
    assert not app.exception
    assert "no mask" in view(app, "Mask M").title
    query = "“b”" if kind == "encoder" else "“d”"  # source "a b c d" / decoder inputs "<bos> d c"
    assert f"**Query:** {query} (position 1)" in " ".join(shown(m) for m in app.markdown)
    keys = view(app, "Keys and values are projected from").title
    assert ("encoder's output" in keys) == (kind == "cross")


def sidebar(app: AppTest) -> tuple[str, int, object]:
    """What the sidebar's kind, layer and head selectors show."""
    return app.radio(key="_w_kind").value, app.selectbox(key="_w_layer").value, app.selectbox(key="_w_head").value


def sidebar_for(app: AppTest) -> AppTest:
    """The app drawn afresh for `app`'s view state. AppTest draws app.py's sidebar on a session's first
    run only (later runs execute the page file alone), so the sidebar a page's choice leads to is read here."""
    fresh = AppTest.from_file(APP, default_timeout=CEILING)
    for key in ("sentence", "kind", "layer", "head", "step"):
        fresh.session_state[key] = app.session_state[key]
    return fresh.run()


def page_pickers(app: AppTest) -> tuple[str, int, object]:
    return (app.selectbox(key="inside_kind").value, app.selectbox(key="inside_layer").value,
            app.selectbox(key="inside_head").value)


def test_the_page_follows_the_sidebar(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    app.radio(key="_w_kind").set_value("encoder")
    app.selectbox(key="_w_layer").set_value(1)
    app.selectbox(key="_w_head").set_value(3)
    app.run()
    app.switch_page(PAGE).run()
    assert not app.exception
    assert page_pickers(app) == ("encoder", 1, 3)
    assert "**Encoder self-attention · layer 1 · head 3**" in " ".join(shown(m) for m in app.markdown)
    assert view(app, "Query and keys of head 3") and view(app, "Keys and values are projected from layer 1's input")


def test_the_sidebar_follows_the_page(app: AppTest) -> None:
    open_inside(app)
    app.selectbox(key="inside_kind").set_value("decoder").run()
    app.selectbox(key="inside_layer").set_value(0).run()
    app.selectbox(key="inside_head").set_value(2).run()
    assert not app.exception
    assert "causal" in view(app, "Mask M").title and view(app, "Query and keys of head 2")
    assert (app.session_state["kind"], app.session_state["layer"], app.session_state["head"]) == ("decoder", 0, 2)
    translate = sidebar_for(app)
    assert sidebar(translate) == ("decoder", 0, 2)
    (sent,) = explorers(translate)
    assert (sent.selection["kind"], sent.selection["layer"], sent.selection["head"]) == ("decoder", 0, 2)


def test_a_mean_of_heads_opens_head_0_and_says_so(app: AppTest) -> None:
    app.session_state["head"] = "mean"
    open_inside(app)
    assert page_pickers(app)[2] == "mean"
    assert any("shows head 0" in shown(i) for i in app.info)
    assert view(app, "Query and keys of head 0")
    assert "head 0** (in place of the mean of heads)" in " ".join(shown(m) for m in app.markdown)
    app.selectbox(key="inside_head").set_value(1).run()
    assert app.session_state["head"] == 1 and not any("shows head 0" in shown(i) for i in app.info)
    assert sidebar(sidebar_for(app))[2] == 1


def test_rotation_check_on_the_models_own_table(app: AppTest) -> None:
    open_positions(open_inside(app))
    app.number_input(key="inside_pe_offset").set_value(5).run()
    caption = next(shown(c) for c in app.caption if c.value.startswith("PE(t+5)"))
    assert float(re.search(r"max error ([0-9.]+e[+-][0-9]+)", caption).group(1)) <= 1e-5


def test_learned_positions_show_the_fitted_error(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A (random, tiny) pre-LN model with learned positions: no rotation panels, the fit's error instead."""
    import streamlit as st

    from attnscope.checkpoints.checkpoint import save
    from tests.app.conftest import APP
    from tests.engine_fixtures import tiny_translator

    tr = tiny_translator(0, eos_bias=2.0, positional="learned", norm="pre")
    save(tr.model, tr.bundle, tmp_path / "tiny-learned.safetensors")
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(tmp_path))
    st.cache_data.clear()
    st.cache_resource.clear()
    app = open_inside(AppTest.from_file(APP, default_timeout=CEILING), "a b c")
    assert not app.exception, [e.value for e in app.exception]
    assert "Pre-LN residual block" in view(app, "Pre-LN").title
    open_positions(app)
    caption = next(shown(c) for c in app.caption if "Learned encodings have no formula" in shown(c))
    assert float(re.search(r"Offset 3: relative error ([0-9.]+) here", caption).group(1)) > 0.01
    with pytest.raises(AssertionError):
        chart_titled(app, "Section 3.5")
