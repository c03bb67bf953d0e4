"""AppTest journeys on the Inside-one-head page (toy reverse model: "a b c d" -> "d c b a")."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.support import shown

PAGE = "pages/inside.py"


def open_inside(app: AppTest, sentence: str = "a b c d") -> AppTest:
    app.session_state["sentence"] = sentence
    app.run()
    return app.switch_page(PAGE).run()


def figure(app: AppTest, title_start: str) -> dict:
    for chart in app.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if spec["layout"].get("title", {}).get("text", "").replace("<br>", " ").startswith(title_start):
            return spec
    raise AssertionError(f"no chart titled {title_start!r}")


def values(trace: dict, name: str) -> np.ndarray:
    """A plotly trace's array, whether plain JSON or plotly's base64 typed-array encoding."""
    data = trace[name]
    if isinstance(data, dict) and "bdata" in data:
        import base64
        shape = tuple(int(n) for n in str(data.get("shape", "-1")).split(","))
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"])).reshape(shape)
    return np.asarray(data, dtype=float)


def test_page_shows_every_panel_and_the_row_matches_the_recording(app: AppTest) -> None:
    open_inside(app)
    assert not app.exception, [e.value for e in app.exception]
    assert len(app.get("plotly_chart")) >= 14
    delta = next(shown(c) for c in app.caption if "max |Δ|" in shown(c))
    assert float(re.search(r"max \|Δ\| = ([0-9.]+e[+-][0-9]+)", delta).group(1)) <= 1e-6
    for start in ("Eq. 1", "MultiHead = Concat", "Concat·W^O", "Residual + LayerNorm", "Logit lens", "Section 3.5"):
        figure(app, start)


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
    scores = figure(app, "Eq. 1")["data"][0]
    assert scores["text"][2] == scores["text"][2][:3] and len(scores["text"][2]) == 3  # keys <bos> d c
    mask = figure(app, "Mask M")
    assert "causal" in mask["layout"]["title"]["text"].replace("<br>", " ")
    assert np.array_equal(values(mask["data"][0], "z"), np.triu(np.ones((3, 3)), 1))
    lens = figure(app, "Logit lens at step 2")
    assert "“b”" in lens["layout"]["title"]["text"].replace("<br>", " ")
    app.switch_page("pages/step.py").run()
    assert app.session_state["step"] == 2


@pytest.mark.parametrize("kind", ["encoder", "cross"])
def test_encoder_and_cross_attention_open_without_a_mask(app: AppTest, kind: str) -> None:
    open_inside(app)
    app.selectbox(key="inside_kind").set_value(kind).run()
    app.slider(key="_w_step").set_value(2).run()
    app.selectbox(key="inside_query_" + kind).set_value(1).run()
    assert not app.exception
    assert "no mask" in figure(app, "Mask M")["layout"]["title"]["text"].replace("<br>", " ")
    query = "“b”" if kind == "encoder" else "“d”"  # source "a b c d" / decoder inputs "<bos> d c"
    assert f"**Query:** {query} (position 1)" in " ".join(shown(m) for m in app.markdown)
    keys = figure(app, "Keys and values are projected from")["layout"]["title"]["text"].replace("<br>", " ")
    assert ("encoder's output" in keys) == (kind == "cross")


def test_the_sidebar_choice_is_the_default(app: AppTest) -> None:
    app.session_state["kind"] = "encoder"
    app.session_state["layer"] = 1
    app.session_state["head"] = 3
    open_inside(app)
    assert (app.selectbox(key="inside_kind").value, app.selectbox(key="inside_layer").value,
            app.selectbox(key="inside_head").value) == ("encoder", 1, 3)


def test_rotation_check_on_the_models_own_table(app: AppTest) -> None:
    open_inside(app)
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
    app = open_inside(AppTest.from_file(APP, default_timeout=60), "a b c")
    assert not app.exception, [e.value for e in app.exception]
    caption = next(shown(c) for c in app.caption if "Learned encodings have no formula" in shown(c))
    assert float(re.search(r"Offset 3: relative error ([0-9.]+) here", caption).group(1)) > 0.01
    assert "Pre-LN residual block" in figure(app, "Pre-LN")["layout"]["title"]["text"]
    with pytest.raises(AssertionError):
        figure(app, "Section 3.5")
