"""AppTest journeys on the Translate page."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from attnscope.checkpoints.checkpoint import save
from tests.app.conftest import app_on
from tests.engine_fixtures import tiny_translator
from tests.support import CEILING, ROOT, Explored, explorers, readable_tables, shown, translation_shown


def explorer(at: AppTest) -> Explored:
    (only,) = explorers(at)
    return only


def test_page_translates_and_sends_every_kind_to_the_explorer(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    assert not app.exception
    assert translation_shown(app).text == "d c b a"
    sent = explorer(app)
    assert not app.get("plotly_chart")  # no second way to draw the same heatmaps
    assert sent.header["mode"] == "heatmap" and sent.selection["kind"] == "cross"
    assert all(sent.header["kinds"][k]["heads"] == 4 and sent.header["complete"] for k in ("encoder", "decoder", "cross"))
    assert sent.header["output"][-1] == "<eos>" and [s["token"] for s in sent.header["steps"]] == ["d", "c", "b", "a", "<eos>"]


def test_the_page_says_what_capture_holds_for_the_sentence(app: AppTest) -> None:
    """One line under the explorer: the recorded arrays' size and shapes (tiny model: 2 layers a side, 4 heads; "a b c
    d" is 5 source tokens and 5 decoder positions: 6 arrays of 4 × 25 float32), and the results' budget."""
    app.session_state["sentence"] = "a b c d"
    app.run()
    held = [c.value for c in app.caption if c.value.startswith("Recorded attention:")]
    assert held == ["Recorded attention: 2.3 KB of float32 (encoder 2 × 4 × 5 × 5, decoder 2 × 4 × 5 × 5, cross "
                    "2 × 4 × 5 × 5: layers × heads × rows × columns), kept with the server's results within "
                    f"{held[0].split('within ')[1]}"] and held[0].endswith(" MB, least recently used first.")


def test_sidebar_kind_opens_the_explorer_on_it(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    app.radio(key="_w_kind").set_value("encoder").run()
    sent = explorer(app)
    assert sent.selection["kind"] == "encoder" and sent.header["source"] == ["a", "b", "c", "d", "<eos>"]


def test_shared_link_opens_its_kind(app: AppTest) -> None:
    app.query_params["sentence"] = "a b c d"
    app.query_params["kind"] = "decoder"
    app.run()
    assert explorer(app).selection["kind"] == "decoder"
    assert app.radio(key="_w_kind").value == "decoder"


def test_tokens_label_the_axes_and_repeats_stay_separate(app: AppTest) -> None:
    app.session_state["sentence"] = "a b a"
    app.session_state["kind"] = "cross"
    app.run()
    sent = explorer(app)
    assert sent.header["source"] == ["a", "b", "a", "<eos>"]
    assert sent.arrays["cross"].shape[2:] == (len(sent.header["output"]), 4) and sent.header["output"][-1] == "<eos>"


def test_what_the_user_picks_in_the_browser_becomes_the_view() -> None:
    """The component's callback: the view it reports is stored as the session's (sidebar and URL follow)."""
    from streamlit.testing.v1 import AppTest as Probe

    def script() -> None:
        import streamlit as st

        from attnscope.ui import state
        from attnscope.ui.explorer import _follow

        st.session_state["explorer-x"] = {"view": {"kind": "encoder", "layer": 2, "head": None, "step": 3}}
        _follow("explorer-x")
        view = state.read()
        st.write(f"{view.kind} {view.layer} {view.head} {view.step}")

    probe = Probe.from_function(script).run()
    assert not probe.exception and probe.markdown[0].value == "encoder 2 None 3"


def test_empty_sentence_gives_a_message_not_a_traceback(app: AppTest) -> None:
    app.session_state["sentence"] = "   "
    app.run()
    assert not app.exception
    assert any("empty" in shown(w) for w in app.warning)
    assert not app.get("bidi_component")


def test_unknown_characters_are_reported(app: AppTest) -> None:
    app.session_state["sentence"] = "a b ☃"
    app.run()
    assert not app.exception
    assert any("☃" in shown(i) for i in app.info)


def test_layer_and_head_selectors_open_the_explorer_there(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c"
    app.run()
    assert explorer(app).selection["head"] is None
    app.selectbox(key="_w_head").set_value(1).run()
    assert explorer(app).selection["head"] == 1


def test_a_pick_reported_by_the_browser_resends_nothing_and_a_sidebar_change_reaches_it(app: AppTest) -> None:
    """After a pick in the browser the rerun's payload is byte for byte the one sent (Streamlit's message cache then
    sends a reference, and the browser keeps its own view); a change made in the sidebar opens the payload on it."""
    from attnscope.ui import state
    from attnscope.viz.explorer import Selection

    app.session_state["sentence"] = "a b c d"
    app.run()
    first = app.get("bidi_component")[0].proto.bytes
    app.session_state["head"] = 2  # what the explorer's callback leaves after the browser picked head 2
    app.session_state[state.explorer_reported("explorer-translate")] = Selection("cross", 0, 2, 0)
    app.run()
    assert app.get("bidi_component")[0].proto.bytes == first
    app.selectbox(key="_w_head").set_value(1).run()
    assert explorer(app).selection["head"] == 1
    epoch = explorer(app).header["epoch"]
    app.session_state[state.explorer_reported("explorer-translate")] = Selection("cross", 0, 3, 0)  # picked there
    app.session_state["head"] = 3
    app.run()
    app.selectbox(key="_w_head").set_value(1).run()  # back to what it was sent: it must still follow
    assert explorer(app).selection["head"] == 1 and explorer(app).header["epoch"] == epoch + 1


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
    assert explorer(app).selection == {"kind": "decoder", "layer": 1, "head": 2, "step": 0}


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
    sent = explorer(app)
    assert sent.header["per_head_scale"] and len(sent.header["source"]) == 46  # every token, coloured per head


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
