"""AppTest journeys on the Translate page."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from attnscope.checkpoints.checkpoint import save
from tests.app.conftest import app_on
from tests.engine_fixtures import tiny_translator
from tests.support import CEILING, ROOT, readable_tables, shown, translation_shown


def chart_specs(at: AppTest) -> list[dict]:
    """The large per-head heatmaps (not the all-heads grids), in tab order."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [s for s in specs if "every layer and head" not in s["layout"]["title"]["text"]]


def grid_specs(at: AppTest) -> list[dict]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [s for s in specs if "every layer and head" in s["layout"]["title"]["text"]]


def test_page_translates_and_draws_the_chosen_kind_only(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    assert not app.exception
    assert translation_shown(app).text == "d c b a"
    specs = chart_specs(app)
    assert len(specs) == 1 and specs[0]["layout"]["title"]["text"].startswith("Cross-attention")
    grids = grid_specs(app)
    assert len(grids) == 1
    assert grids[0]["layout"]["xaxis"]["ticktext"] == ["head 0", "head 1", "head 2", "head 3"]


def test_sidebar_kind_chooses_the_tab(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    app.radio(key="_w_kind").set_value("encoder").run()
    (encoder,) = chart_specs(app)
    assert encoder["layout"]["title"]["text"].startswith("Encoder self-attention")
    assert encoder["layout"]["xaxis"]["ticktext"] == ["a", "b", "c", "d", "<eos>"]
    assert app.session_state["_w_kind_tab"] == "Encoder self-attention"


def test_shared_link_opens_its_kind(app: AppTest) -> None:
    app.query_params["sentence"] = "a b c d"
    app.query_params["kind"] = "decoder"
    app.run()
    (decoder,) = chart_specs(app)
    assert decoder["layout"]["title"]["text"].startswith("Decoder masked self-attention")
    assert app.radio(key="_w_kind").value == "decoder"


def test_tokens_are_tick_labels_and_repeats_stay_separate(app: AppTest) -> None:
    app.session_state["sentence"] = "a b a"
    app.session_state["kind"] = "cross"
    app.run()
    cross = chart_specs(app)[0]
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
    before = chart_specs(app)[0]["data"][0]["z"]
    app.selectbox(key="_w_head").set_value(1).run()
    after = chart_specs(app)[0]
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
    assert translation_shown(app).source == "c b a"
    assert "layer 1 · head 2" in chart_specs(app)[0]["layout"]["title"]["text"]


def test_output_cut_by_the_length_limit_is_reported(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d e f"
    app.session_state["max_len"] = 3
    app.run()
    assert any("stopped at the maximum of 3 tokens" in shown(i) for i in app.info)


def test_an_empty_maximum_decodes_to_the_sources_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    endless = tiny_translator(0, eos_bias=-50.0)  # never ends a sentence: every output runs to its budget
    save(endless.model, endless.bundle, tmp_path / "endless.safetensors")
    app = app_on(tmp_path, monkeypatch, "a b c")
    assert not app.exception
    assert app.number_input(key="_w_max_len").value is None  # empty: the source sets the budget
    n_src = len(endless.source("a b c")[0])
    assert any(f"the default budget (twice the source plus 10) of {2 * n_src + 10} tokens" in shown(i) for i in app.info)
    app.number_input(key="_w_max_len").set_value(5).run()
    assert any("stopped at the maximum of 5 tokens" in shown(i) for i in app.info)


def test_long_input_is_flagged_and_scaled_per_head(app: AppTest) -> None:
    app.session_state["sentence"] = " ".join("abcdefghij"[i % 10] for i in range(45))
    app.session_state["kind"] = "encoder"
    app.run()
    assert not app.exception
    assert any("at most about 10" in shown(i) for i in app.info)  # the toy model saw 3-10 letters
    (encoder,) = chart_specs(app)
    assert "zmax" not in encoder["data"][0] and len(encoder["layout"]["xaxis"]["ticktext"]) <= 40
    assert app.toggle(key="per_head_scale_long").value


def test_examples_menu_fills_the_box_and_resets(app: AppTest) -> None:
    app.run()
    app.selectbox(key="_example").set_value(state_examples()[1]).run()
    assert app.text_area(key="_w_sentence").value == state_examples()[1]
    assert app.selectbox(key="_example").value == "—"


def state_examples() -> tuple[str, ...]:
    from attnscope.ui.widgets import EXAMPLES
    return EXAMPLES


def test_translate_button_translates_what_the_box_holds(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    assert app.button(key="translate_go").label == "Translate"
    app.text_area(key="_w_sentence").set_value("a b e")
    app.button(key="translate_go").click().run()
    assert not app.exception
    block = translation_shown(app)
    assert (block.source, block.text) == ("a b e", "e b a")  # the block names the sentence it translates
    assert app.session_state["sentence"] == "a b e"


def test_a_stale_translation_is_marked_with_its_own_sentence(app: AppTest) -> None:
    """The note the browser shows while the box holds other text (tests/e2e checks it appears) names the
    sentence the results belong to."""
    app.session_state["sentence"] = "c a b"
    app.run()
    (markup,) = [h.value for h in app.get("html") if 'class="attn-sentence"' in h.value]
    assert 'data-source="c a b"' in markup  # what the browser compares the box with
    note = re.search(r'<div class="stale"[^>]*>(.*?)</div>', markup)[1]
    assert "Press <b>Translate</b>" in note and "belongs to the previous sentence: “c a b”" in note


def test_the_translation_is_the_headline_not_a_quote(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    assert not any("d c b a" in shown(m) for m in app.markdown)  # no longer a pale blockquote
    style = re.search(r"\.attn-translation \.txt\{([^}]*)\}", translation_shown(app).markup)[1]
    assert "font-size:2.75rem" in style and "color:inherit" in style and "opacity:1" in style  # as large as the title


def test_reference_comparison_table_is_readable(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c"
    app.run()
    app.text_input(key="reference").set_value("c a b").run()
    assert not app.exception
    (table,) = readable_tables(app)
    assert list(table) == ["step", "reference token", "model's probability of it", "model's own choice"]


@pytest.fixture
def shipped_app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AppTest:
    """The app on the repository's shipped checkpoints (default: English → German)."""

    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("ATTNSCOPE_USER_MODELS", str(tmp_path / "user_models"))
    st.cache_data.clear()
    st.cache_resource.clear()
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=CEILING)


def language_hints(app: AppTest) -> list[str]:
    return [shown(i) for i in app.info if "looks like" in shown(i)]


def test_german_typed_into_the_en_de_model_gets_a_gentle_hint(shipped_app: AppTest) -> None:
    shipped_app.session_state["sentence"] = "Ein Mann fährt Fahrrad."
    shipped_app.run()
    assert not shipped_app.exception and not shipped_app.error and not shipped_app.warning  # a hint, not an error
    (hint,) = language_hints(shipped_app)
    assert hint.startswith("This sentence looks like German") and "ein, mann, fährt, fahrrad" in hint
    assert "type a sentence in English" in hint
    shipped_app.text_area(key="_w_sentence").set_value("A man rides a bike.").run()
    assert not language_hints(shipped_app)
    assert translation_shown(shipped_app).source == "A man rides a bike."
