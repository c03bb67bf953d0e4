"""AppTest journeys on the Inside-one-head page (toy reverse model: "a b c d" -> "d c b a")."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import attnscope
from attnscope.engine.inside.lens import logit_lens
from attnscope.engine.inside.traced import sentence_trace
from attnscope.engine.recording.trace import decoder_inputs
from tests.app.conftest import APP
from tests.support import CEILING, TOY_CHECKPOINT, Explored, explorers, page_script, shown

PAGE = page_script("Inside one head")


def open_inside(app: AppTest, sentence: str = "a b c d") -> AppTest:
    app.session_state["sentence"] = sentence
    app.run()
    return app.switch_page(PAGE).run()


def open_positions(app: AppTest) -> AppTest:
    """The page's second tab: the positional panels (drawn only while their tab is open)."""
    app.session_state["inside_tab"] = "6 · Positional encodings (section 3.5)"
    return app.run()


def chart_titled(app: AppTest, title_start: str) -> dict:
    """The plotly chart (positional panels) whose title starts with `title_start`."""
    for chart in app.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if spec["layout"].get("title", {}).get("text", "").replace("<br>", " ").startswith(title_start):
            return spec
    raise AssertionError(f"no chart titled {title_start!r}")


def inside_explorer(app: AppTest) -> Explored:
    """What the page sent its explorer (sections 1-5 are drawn in the browser from it)."""
    (sent,) = explorers(app)
    assert sent.header["mode"] == "inside"
    return sent


def test_page_ships_the_traced_sentence_once_and_the_arrays_are_the_models(app: AppTest) -> None:
    open_inside(app)
    assert not app.exception, [e.value for e in app.exception]
    assert not app.get("plotly_chart")  # the head is drawn in the browser, from the one payload below
    sent = inside_explorer(app)
    assert sent.header["complete"] and sent.header["target"] == ["<bos>", "d", "c", "b", "a"]
    assert sent.header["output"] == ["d", "c", "b", "a", "<eos>"] and sent.header["source"] == ["a", "b", "c", "d", "<eos>"]
    tr = attnscope.load(TOY_CHECKPOINT)
    result = tr.translate("a b c d")
    with tr.inference():
        whole = sentence_trace(tr.model, result.source_ids, decoder_inputs(result.target_ids, tr.model.config.bos_id))
    for (kind, layer), s in whole.sublayers.items():  # every layer of every kind, as the model computed it
        for name in ("q", "k", "v", "scores", "weights", "concat", "output", "w_o", "b_o", "residual", "block_output"):
            assert np.array_equal(sent.arrays[f"{kind}.{layer}.{name}"], getattr(s, name)), (kind, layer, name)
        assert sent.arrays[f"{kind}.{layer}.gap"].max() <= 1e-6  # the rows equal the recorded heatmaps'
    assert np.array_equal(sent.arrays["memory"], whole.memory)
    lens = logit_lens(tr.model, whole, 2, result.steps[2].token_id)
    assert sent.header["lens"]["chosen"][2] == "b" and sent.header["lens"]["top"][2][-1][0] == "b"
    assert np.abs(sent.arrays["lens.top_probs"][2] - lens.top_probs).max() <= 1e-6
    assert any("[ / ] query token" in shown(c) for c in app.caption)  # the keys, listed
    open_positions(app)
    assert not app.exception and len(app.get("plotly_chart")) == 3 and not explorers(app)
    chart_titled(app, "Section 3.5")


def test_a_query_picked_in_the_browser_is_kept_per_kind_and_the_step_is_shared(app: AppTest) -> None:
    """The browser reports kind, layer, head, step and query token; the page opens on them again (another page, the
    URL and the sidebar follow the step, kind, layer and head)."""
    open_inside(app)
    probe = AppTest.from_function(_report, default_timeout=CEILING).run()
    assert not probe.exception and probe.markdown[0].value == "decoder 1 2 2 · query 1"
    for key in ("kind", "layer", "head", "step", "inside_query_decoder"):
        app.session_state[key] = probe.session_state[key]
    app.run()
    assert inside_explorer(app).selection == {"kind": "decoder", "layer": 1, "head": 2, "step": 2, "query": 1}
    app.switch_page(page_script("Step through decoding")).run()
    assert app.session_state["step"] == 2


def _report() -> None:
    import streamlit as st

    from attnscope.ui import state
    from attnscope.ui.explorer import _follow

    st.session_state["inside"] = {"view": {"kind": "decoder", "layer": 1, "head": 2, "step": 2, "query": 1}}
    _follow("inside")
    view = state.read()
    st.write(f"{view.kind} {view.layer} {view.head} {view.step} · query {state.stored(state.inside_query('decoder'))}")


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


def test_the_page_follows_the_sidebar(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    app.radio(key="_w_kind").set_value("encoder")
    app.selectbox(key="_w_layer").set_value(1)
    app.selectbox(key="_w_head").set_value(3)
    app.run()
    app.switch_page(PAGE).run()
    assert not app.exception
    selection = inside_explorer(app).selection
    assert (selection["kind"], selection["layer"], selection["head"]) == ("encoder", 1, 3)


def test_the_sidebar_follows_the_page(app: AppTest) -> None:
    open_inside(app)
    for key, value in (("kind", "decoder"), ("layer", 0), ("head", 2), ("step", 1)):  # what a browser pick stores
        app.session_state[key] = value
    app.run()
    assert not app.exception
    translate = sidebar_for(app)
    assert sidebar(translate) == ("decoder", 0, 2)
    (sent,) = explorers(translate)
    assert (sent.selection["kind"], sent.selection["layer"], sent.selection["head"]) == ("decoder", 0, 2)


def test_a_mean_of_heads_opens_with_the_mean_for_the_browser_to_say_so(app: AppTest) -> None:
    """The browser shows head 0 in place of the mean and says so (tests/e2e); the session keeps the mean."""
    app.session_state["head"] = "mean"
    open_inside(app)
    assert inside_explorer(app).selection["head"] is None and app.session_state["head"] == "mean"


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
    assert inside_explorer(app).header["norm"] == "pre"  # the browser titles it "Pre-LN residual block"
    open_positions(app)
    caption = next(shown(c) for c in app.caption if "Learned encodings have no formula" in shown(c))
    assert float(re.search(r"Offset 3: relative error ([0-9.]+) here", caption).group(1)) > 0.01
    with pytest.raises(AssertionError):
        chart_titled(app, "Section 3.5")
