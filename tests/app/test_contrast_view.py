"""AppTest journeys of the Step page's contrast: a forced rival brings the branches' compare view and the contrastive
attributions of the step, with integrated gradients on request and their completeness."""
from __future__ import annotations

import json

import numpy as np
from streamlit.testing.v1 import AppTest

from attnscope.engine.attribution.contrastive import CONTRASTIVE_GRADIENT, CONTRASTIVE_INTEGRATED, Contrast, as_rows
from attnscope.engine.attribution.sentence import contrast_attribute
from tests.app.test_step_page import browser_moves_to, chart_titles, open_step_page
from tests.engine_fixtures import tiny_translator
from tests.support import explorers, shown


def forced_at_one(app: AppTest) -> tuple[AppTest, str]:
    open_step_page(app)
    browser_moves_to(app, 1)
    box = app.selectbox(key="force_choice-1")
    rival = next(tok for tok in box.options if not tok.startswith("<"))
    box.set_value(rival).run()
    assert not app.exception
    return app, rival


def test_a_forced_rival_compares_the_branches_and_explains_the_contrast(app: AppTest) -> None:
    app, rival = forced_at_one(app)
    step, branches = explorers(app)
    assert step.header["mode"] == "step" and branches.header["mode"] == "compare"
    compared = branches.header["compare"]
    assert compared["what"] == "branches" and compared["b"]["label"] == "forced branch"
    texts = [shown(m) for m in app.markdown]
    assert any(t.startswith(f"**Why “c” and not “{rival}” at step 1?**") for t in texts)
    said = next(t for t in texts if t.startswith(f"*{CONTRASTIVE_GRADIENT}*"))
    assert "The difference is" in said and f"towards “{rival}”" in said
    assert "Step 1: “c” rather than" in chart_titles(app)[-1]
    assert [b.proto.label for b in app.get("download_button")] == ["Contrastive attributions (JSON)"]
    assert not any("Integrated gradients used" in shown(c) for c in app.caption)
    table = next(m.value for m in app.markdown if m.value.startswith("| method | what it computes | exact | cost |"))
    assert f"| {CONTRASTIVE_GRADIENT} | gradient × input of log p(token) − log p(foil) at one step | no" in table


def test_integrated_gradients_join_on_request_and_report_their_completeness(app: AppTest) -> None:
    app, _ = forced_at_one(app)
    app.toggle(key="contrast_ig").set_value(True).run()
    assert not app.exception
    assert any(shown(m).startswith(f"*{CONTRASTIVE_INTEGRATED} (") for m in app.markdown)
    report = next(shown(c) for c in app.caption if "Integrated gradients used" in shown(c))
    assert "the change of the log-probability difference" in report and "Every token met the tolerance" in report


def test_a_typed_word_that_is_the_chosen_token_is_told_plainly(app: AppTest) -> None:
    open_step_page(app)
    app.text_input(key="force_typed-0").set_value("d").run()  # step 0 chose “d”
    assert not app.exception
    assert any("the foil is the token the step chose" in shown(w) for w in app.warning)


def test_the_download_holds_every_method_s_signed_scores_and_what_they_add_up_to() -> None:
    tr = tiny_translator(0, eos_bias=2.0)
    result = tr.translate("a b c d")
    foil = next(i for i in result.steps[2].top_ids if i != result.target_ids[2])
    results = contrast_attribute(tr, result, Contrast(2, foil))
    source, prefix = list(result.source_tokens), list(result.attention.target_tokens[:3])
    rows = json.loads(json.dumps(as_rows(results, source, prefix, "x", "y", 2)))
    one = rows["methods"][CONTRASTIVE_GRADIENT]
    assert [t for t, _ in one["source"]] == source and [t for t, _ in one["prefix"]] == prefix
    scores = np.array([v for _, v in one["source"] + one["prefix"]])
    assert abs(one["total"] - scores.sum()) < 1e-9
    assert rows["step"] == 2 and rows["explains"].startswith("log p(token) - log p(foil)")
