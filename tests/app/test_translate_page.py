"""AppTest journeys on the Translate page."""
from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from tests.support import shown


def chart_specs(at: AppTest) -> list[dict]:
    """The large per-head heatmaps (not the all-heads grids), in tab order."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [s for s in specs if "every layer and head" not in s["layout"]["title"]["text"]]


def grid_specs(at: AppTest) -> list[dict]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [s for s in specs if "every layer and head" in s["layout"]["title"]["text"]]


def test_page_translates_and_shows_three_heatmaps(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    assert not app.exception
    assert any(shown(m) == "> d c b a" for m in app.markdown)
    specs = chart_specs(app)
    assert len(specs) == 3
    encoder = specs[0]["layout"]["xaxis"]["ticktext"]
    assert encoder == ["a", "b", "c", "d", "<eos>"]
    grids = grid_specs(app)
    assert len(grids) == 3
    assert grids[0]["layout"]["xaxis"]["ticktext"] == ["head 0", "head 1", "head 2", "head 3"]


def test_tokens_are_tick_labels_and_repeats_stay_separate(app: AppTest) -> None:
    app.session_state["sentence"] = "a b a"
    app.session_state["kind"] = "cross"
    app.run()
    cross = chart_specs(app)[2]
    assert cross["layout"]["xaxis"]["ticktext"] == ["a", "b", "a", "<eos>"]
    assert cross["layout"]["xaxis"]["tickvals"] == [0, 1, 2, 3]
    rows = cross["layout"]["yaxis"]["ticktext"]
    assert rows[-1] == "<eos>" and cross["layout"]["yaxis"]["tickvals"] == list(range(len(rows)))


def test_empty_sentence_gives_a_message_not_a_traceback(app: AppTest) -> None:
    app.session_state["sentence"] = "   "
    app.run()
    assert not app.exception
    assert any("empty" in shown(w) for w in app.warning)
    assert not app.get("plotly_chart")


def test_unknown_characters_are_reported(app: AppTest) -> None:
    app.session_state["sentence"] = "a b ☃"
    app.run()
    assert not app.exception
    assert any("☃" in shown(i) for i in app.info)


def test_layer_and_head_selectors_change_the_heatmap(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c"
    app.run()
    before = chart_specs(app)[2]["data"][0]["z"]
    app.selectbox(key="_w_head").set_value(1).run()
    after = chart_specs(app)[2]
    assert "head 1" in after["layout"]["title"]["text"]
    assert after["data"][0]["z"] != before


def test_url_parameters_restore_the_view(app: AppTest) -> None:
    app.query_params["sentence"] = "c b a"
    app.query_params["layer"] = "1"
    app.query_params["head"] = "2"
    app.query_params["kind"] = "decoder"
    app.run()
    assert not app.exception
    assert app.session_state["sentence"] == "c b a"
    assert app.session_state["layer"] == 1 and app.session_state["head"] == 2
    assert any(shown(m).startswith("> ") for m in app.markdown)
    assert "layer 1 · head 2" in chart_specs(app)[1]["layout"]["title"]["text"]
