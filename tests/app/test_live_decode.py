"""The live decode on the pages (AppTest): a greedy translation streams into the same result translate gives; Stop
keeps the prefix as a stopped record that every page shows; a stopped translation can be decoded in full; a large
budget is given its time before it starts, from the model's measured cost. A beam search likewise: it streams into
translate's beam search, and Stop keeps its best hypothesis so far."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from attnscope.checkpoints import checkpoint
from attnscope.engine.decoding.beam_streaming import stopped_beam_note
from attnscope.engine.decoding.streaming import stopped_note
from attnscope.engine.decoding.translator import Translator
from attnscope.ui import live_decode, widgets
from attnscope.ui.cache import result_key
from attnscope.ui.live_decode import TokenCosts
from attnscope.ui.query import Query
from tests.app.conftest import APP, app_on
from tests.support import CEILING, explorers, page_script, shown, translation_shown

SENTENCE = "a b c d e f g h"  # the toy model reverses it: 9 tokens with <eos>


def toy_translator(folder: Path) -> Translator:
    """The app's translator of the toy checkpoint in `folder`, as ui/models.py loads it (same cache key)."""
    path = next(folder.glob("*.safetensors"))
    return Translator(*checkpoint.load(path), label=path.stem, revision=path.stat().st_mtime)


def interrupted(app: AppTest, tr: Translator, steps: int, stop: bool, beam: int = 1) -> Translator:
    """The session as a run interrupted after `steps` tokens (a beam's: steps) leaves it (the stream waiting in the
    session), and, with `stop`, as the Stop button's click leaves it for the next run."""
    name = result_key("translate", Query.of(tr, SENTENCE, beam))
    stream = tr.stream(SENTENCE, beam_size=beam)
    for step in stream if steps else ():
        if step.index == steps - 1:
            break
    app.session_state[live_decode.LIVE_DECODE] = (name, stream)
    if stop:
        app.session_state[live_decode.STOP_DECODE] = name
    return tr


def test_a_streamed_translation_is_translate_s(toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_on(toy_checkpoint_dir, monkeypatch, SENTENCE)
    assert not app.exception
    assert translation_shown(app).text == "h g f e d c b a"
    assert live_decode.STOP_BUTTON not in [b.key for b in app.button]  # Stop is gone once decoded
    assert live_decode.LIVE_DECODE not in app.session_state


def test_stop_keeps_the_prefix_and_every_page_shows_it(toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_on(toy_checkpoint_dir, monkeypatch)
    app.session_state["sentence"] = SENTENCE
    tr = interrupted(app, toy_translator(toy_checkpoint_dir), 3, stop=True)
    app.run()
    assert not app.exception
    assert translation_shown(app).text == "h g f"
    assert stopped_note(3, tr.translate(SENTENCE).budget) in [shown(i) for i in app.info]
    (sent,) = explorers(app)
    assert sent.header["output"] == ["h", "g", "f"]
    step = app.switch_page(page_script("Step through decoding")).run()  # the stopped record is the translation on every page
    assert not step.exception and stopped_note(3, tr.translate(SENTENCE).budget) in [shown(i) for i in step.info]
    other = AppTest.from_file(APP, default_timeout=CEILING)  # another user's session: its own, full decode
    other.session_state["sentence"] = SENTENCE
    assert translation_shown(other.run()).text == "h g f e d c b a"
    step.button(key=widgets.DECODE_AGAIN).click().run()  # decoded again, in full
    assert not step.exception and not any("stopped" in shown(i) for i in step.info)
    assert translation_shown(step.switch_page(page_script("Translate")).run()).text == "h g f e d c b a"


def test_stopped_before_the_first_token(toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_on(toy_checkpoint_dir, monkeypatch)
    app.session_state["sentence"] = SENTENCE
    tr = interrupted(app, toy_translator(toy_checkpoint_dir), 0, stop=True)
    app.run()
    assert not app.exception and translation_shown(app) is None and not explorers(app)
    assert stopped_note(0, tr.translate(SENTENCE).budget) in [shown(i) for i in app.info]
    app.button(key=widgets.DECODE_AGAIN).click().run()
    assert translation_shown(app).text == "h g f e d c b a"


def test_a_stop_that_finds_its_decode_ended_is_ignored(toy_checkpoint_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Stop clicked just as the decode ended: the next decode of that sentence is not stopped by it."""
    app = app_on(toy_checkpoint_dir, monkeypatch)
    tr = toy_translator(toy_checkpoint_dir)
    app.session_state["sentence"] = SENTENCE
    app.session_state[live_decode.STOP_DECODE] = result_key("translate", Query.of(tr, SENTENCE))
    app.run()
    assert translation_shown(app).text == "h g f e d c b a" and live_decode.STOP_DECODE not in app.session_state


def test_an_interrupted_decode_goes_on_where_it_was(toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rerun that was not Stop's (a click elsewhere while decoding) finishes the same stream."""
    app = app_on(toy_checkpoint_dir, monkeypatch)
    app.session_state["sentence"] = SENTENCE
    interrupted(app, toy_translator(toy_checkpoint_dir), 3, stop=False)
    app.run()
    assert not app.exception and translation_shown(app).text == "h g f e d c b a"
    assert not any("stopped" in shown(i) for i in app.info)


def test_a_large_budget_is_given_its_time_first(toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the model's cost per token is measured (its first decode), a decode of a large budget says its time."""
    app = app_on(toy_checkpoint_dir, monkeypatch, SENTENCE, max_len=30)  # 9 tokens measure; 30: no estimate
    assert not app.exception
    seen = []
    monkeypatch.setattr("attnscope.ui.live_decode.LARGE_BUDGET", 20)
    monkeypatch.setattr("streamlit.delta_generator.DeltaGenerator.caption",
                        lambda self, body, *a, **k: seen.append(body))
    app.session_state["sentence"] = "a b c"
    app.run()
    assert not app.exception
    assert any(text.startswith("Up to 30 output tokens: at most about") for text in seen)


def test_token_costs_follow_the_latest_decodes() -> None:
    costs = TokenCosts()
    assert costs.get("m") is None
    costs.add("m", 0.04)
    costs.add("m", 0.02)
    assert costs.get("m") == pytest.approx(0.03) and costs.get("other") is None


def test_a_streamed_beam_search_is_translate_s(toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_on(toy_checkpoint_dir, monkeypatch)
    app.session_state["sentence"], app.session_state["beam"] = SENTENCE, 3
    app.run()
    assert not app.exception
    whole = toy_translator(toy_checkpoint_dir).translate(SENTENCE, beam_size=3)
    assert translation_shown(app).text == whole.text and not any("stopped" in shown(i) for i in app.info)
    assert explorers(app)[0].header["output"] == list(whole.output_tokens)
    assert live_decode.STOP_BUTTON not in [b.key for b in app.button] and live_decode.LIVE_DECODE not in app.session_state


def test_stop_keeps_the_beam_s_best_hypothesis_and_the_step_page_shows_its_tree(
        toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_on(toy_checkpoint_dir, monkeypatch)
    app.session_state["sentence"], app.session_state["beam"] = SENTENCE, 3
    tr = interrupted(app, toy_translator(toy_checkpoint_dir), 3, stop=True, beam=3)
    reference = tr.stream(SENTENCE, beam_size=3)  # the same search, stopped after the same 3 steps
    for step in reference:
        if step.index == 2:
            break
    expected = reference.result()
    app.run()
    assert not app.exception
    note = stopped_beam_note(3, expected.budget, 3)
    assert expected.stopped and len(expected.target_ids) == 3 and note in [shown(i) for i in app.info]
    assert translation_shown(app).text == expected.text == "h g f"
    assert explorers(app)[0].header["output"] == ["h", "g", "f"]
    step = app.switch_page(page_script("Step through decoding")).run()
    assert not step.exception and note in [shown(i) for i in step.info]
    (hypotheses,) = [box for box in step.selectbox if box.label == "Hypothesis"]
    labels = list(hypotheses.options)  # as the page formats them
    assert labels[0].startswith("1. h g f  (unfinished, in the beam when stopped; score")
    assert len(labels) == len(expected.beam.hypotheses) and step.get("plotly_chart")  # and its tree
    step.button(key=widgets.DECODE_AGAIN).click().run()  # decoded again, in full
    assert not step.exception and not any("stopped" in shown(i) for i in step.info)


def test_a_large_beam_budget_is_given_its_time_for_that_beam_size(toy_checkpoint_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A beam's cost per step is measured for its beam size: greedy's measure gives a beam no estimate."""
    app = app_on(toy_checkpoint_dir, monkeypatch, SENTENCE, max_len=30)  # greedy measures its cost
    seen = []
    monkeypatch.setattr("attnscope.ui.live_decode.LARGE_BUDGET", 20)
    monkeypatch.setattr("streamlit.delta_generator.DeltaGenerator.caption",
                        lambda self, body, *a, **k: seen.append(body))
    app.session_state["beam"] = 3
    app.run()  # the first beam search of 3: measured, not estimated
    assert not app.exception and not any(text.startswith("Up to 30") for text in seen)
    app.session_state["sentence"] = "a b c"
    app.run()
    assert not app.exception
    assert any(text.startswith("Up to 30 steps of a beam of 3: at most about") for text in seen)
