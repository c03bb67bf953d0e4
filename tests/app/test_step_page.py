"""AppTest journeys on the step-through page."""
from __future__ import annotations

import json
import re

from streamlit.testing.v1 import AppTest

from tests.app.conftest import APP
from tests.support import CEILING, explorers, page_script, shown

PAGE = page_script("Step through decoding")


def open_step_page(app: AppTest, sentence: str = "a b c d") -> AppTest:
    app.session_state["sentence"] = sentence
    app.run()
    return app.switch_page(PAGE).run()


def step_sent(app: AppTest) -> str:
    """The step the explorer opens on and the token chosen there, as "step t: token"."""
    (sent,) = explorers(app)
    t = sent.selection["step"]
    return f"step {t}: {sent.header['steps'][t]['token']}"


def browser_moves_to(app: AppTest, step: int) -> AppTest:
    """What the explorer's callback does when the user moves to `step` in the browser (tested in test_translate_page
    and tests/e2e): the session's view holds it, and the page reruns."""
    app.session_state["step"] = step
    return app.run()


def hypothesis_box(app: AppTest):
    return next(box for box in app.selectbox if box.label == "Hypothesis")


def chart_titles(app: AppTest) -> list[str]:
    return [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in app.get("plotly_chart")]


def test_the_steps_go_to_the_explorer_opened_on_the_views_step(app: AppTest) -> None:
    open_step_page(app)
    (sent,) = explorers(app)
    assert sent.header["mode"] == "step" and step_sent(app) == "step 0: d"
    assert [s["token"] for s in sent.header["steps"]] == ["d", "c", "b", "a", "<eos>"]
    assert all(0 < s["prob"] <= 1 and s["top"][0][1] >= s["top"][-1][1] for s in sent.header["steps"])
    browser_moves_to(app, 3)
    assert step_sent(app) == "step 3: a" and app.subheader[0].value == "What if step 3 chose something else?"


def test_forcing_a_token_changes_the_continuation(app: AppTest) -> None:
    open_step_page(app)
    assert app.session_state["step"] == 0
    app.text_input(key="force_typed-0").set_value("b").run()
    assert not app.exception
    texts = [shown(m) for m in app.markdown]
    assert "**Model's choice:** d c b a" in texts
    forced = next(t for t in texts if t.startswith("**Forced branch:**"))
    assert forced.startswith("**Forced branch:** b") and forced != "**Forced branch:** d c b a"


def test_rival_candidate_is_forced(app: AppTest) -> None:
    open_step_page(app)
    box = app.selectbox(key="force_choice-0")
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
    assert hypothesis_box(app).options


def test_url_step_is_restored(app: AppTest) -> None:
    app.query_params["sentence"] = "a b c d"
    app.query_params["step"] = "2"
    app.run()
    app.switch_page(PAGE).run()
    assert step_sent(app) == "step 2: b"


def test_a_step_picked_in_the_browser_reaches_the_url(app: AppTest) -> None:
    open_step_page(app)
    browser_moves_to(app, 1)
    assert app.query_params["step"] in ("1", ["1"])


def test_no_forced_branch_until_the_user_picks_one(app: AppTest) -> None:
    open_step_page(app)
    assert app.selectbox(key="force_choice-0").value is None
    assert not any(shown(m).startswith("**Forced branch:**") for m in app.markdown)
    assert not app.get("plotly_chart") and len(explorers(app)) == 1  # the steps in the explorer, no branch


def test_rival_choice_does_not_follow_to_another_step(app: AppTest) -> None:
    open_step_page(app)
    box = app.selectbox(key="force_choice-0")
    box.set_value(next(tok for tok in box.options if not tok.startswith("<"))).run()
    assert any(shown(m).startswith("**Forced branch:**") for m in app.markdown)
    browser_moves_to(app, 1)
    assert app.selectbox(key="force_choice-1").value is None
    assert not any(shown(m).startswith("**Forced branch:**") for m in app.markdown)


def test_changing_the_beam_size_relabels_the_hypotheses(app: AppTest) -> None:
    app.session_state["beam"] = 3
    open_step_page(app)
    assert len(hypothesis_box(app).options) == 3
    app.number_input(key="_w_beam").set_value(5).run()
    box = hypothesis_box(app)
    assert len(box.options) == 5 and box.options[0].startswith("1. d c b a")
    assert all("(empty output)" not in o for o in box.options)
    tree = next(t for t in chart_titles(app) if t.startswith("Beam search tree"))
    assert "best of 5 hypotheses" in tree


def test_beam_tree_expands_on_request(app: AppTest) -> None:
    app.session_state["beam"] = 4
    open_step_page(app)
    collapsed = next(t for t in chart_titles(app) if t.startswith("Beam search tree"))
    app.slider(key="beam_top-4").set_value(4).run()
    app.toggle(key="beam_pruned").set_value(True).run()
    expanded = next(t for t in chart_titles(app) if t.startswith("Beam search tree"))
    assert "paths of the 3 best of 4" in collapsed and "paths of the 4 best of 4" in expanded


def test_a_shared_url_keeps_the_beam_the_length_and_the_forced_token(app: AppTest) -> None:
    open_step_page(app)
    app.number_input(key="_w_beam").set_value(3).run()
    app.number_input(key="_w_max_len").set_value(7).run()
    shared = {k: v if isinstance(v, str) else v[0] for k, v in app.query_params.items()}
    assert shared["beam"] == "3" and shared["max_len"] == "7"
    fresh = AppTest.from_file(APP, default_timeout=CEILING)  # a fresh browser: nothing but the URL
    fresh.query_params.update(shared)
    fresh.run()
    fresh.switch_page(PAGE).run()
    assert fresh.session_state["beam"] == 3 and fresh.session_state["max_len"] == 7
    assert hypothesis_box(fresh).options and any(t.startswith("Beam search tree") for t in chart_titles(fresh))


def test_a_shared_url_keeps_the_forced_token(app: AppTest) -> None:
    open_step_page(app)
    app.selectbox(key="force_choice-0").set_value("c").run()
    assert app.query_params["force"] in ("c", ["c"])
    fresh = AppTest.from_file(APP, default_timeout=CEILING)
    fresh.query_params.update({"sentence": "a b c d", "step": "0", "force": "c"})
    fresh.run()
    fresh.switch_page(PAGE).run()
    assert fresh.selectbox(key="force_choice-0").value == "c"  # a rival at this step: the picker shows it
    assert any(shown(m).startswith("**Forced branch:** c") for m in fresh.markdown)


def test_one_way_of_forcing_at_a_time_and_the_page_says_which(app: AppTest) -> None:
    open_step_page(app)
    app.selectbox(key="force_choice-0").set_value("c").run()
    assert any(shown(c) == "Forcing the rival “c”." for c in app.caption)
    app.text_input(key="force_typed-0").set_value("b").run()
    assert app.selectbox(key="force_choice-0").value is None  # typing a word empties the picker
    assert any(shown(c).startswith("Forcing the typed word “b”") for c in app.caption)
    app.selectbox(key="force_choice-0").set_value("c").run()
    assert app.text_input(key="force_typed-0").value == ""  # and picking a rival empties the word


def test_an_unknown_typed_word_is_refused_by_name(app: AppTest) -> None:
    open_step_page(app)
    app.text_input(key="force_typed-0").set_value("日本").run()
    assert any("“日本” is not in the target vocabulary" in shown(w) for w in app.warning)
    assert not any(shown(m).startswith("**Forced branch:**") for m in app.markdown)


def test_the_beam_score_and_the_whole_outputs_log_probability_say_which_is_which(app: AppTest) -> None:
    """The beam's “score -0.161” is per token, the what-if's −1.61 is the sum: each says so, and they agree."""
    app.session_state["beam"] = 3
    open_step_page(app)
    first = hypothesis_box(app).options[0]
    score, log_prob, n = re.search(r"score (-?[\d.]+): log-probability (-?[\d.]+) ÷ (\d+) tokens", first).groups()
    assert abs(float(score) - float(log_prob) / int(n)) < 1e-2
    app.number_input(key="_w_beam").set_value(1).run()
    app.text_input(key="force_typed-0").set_value("b").run()
    caption = next(shown(c) for c in app.caption if shown(c).startswith("Log-probability of the whole output"))
    assert "the sum over its tokens (not divided by its length" in caption
    total, count, per_token = re.search(r"model's choice (-?[\d.]+) over (\d+) tokens \((-?[\d.]+) per token\)",
                                        caption).groups()
    assert abs(float(per_token) - float(total) / int(count)) < 1e-2


def test_the_step_page_says_what_capture_holds_too(app: AppTest) -> None:
    open_step_page(app)
    assert [c.value for c in app.caption if c.value.startswith("Recorded attention: 2.3 KB of float32 (encoder")]
