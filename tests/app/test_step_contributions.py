"""The Step page's on-request attribution of one decoding step (ui.attribution.sentence.step_contributions),
run as a script of its own on the toy checkpoint and checked against the engine's own measures."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from scipy.stats import spearmanr
from streamlit.testing.v1 import AppTest

from attnscope.ui.attribution import sentence as attribution_tools
from tests.support import CEILING, shown

SENTENCE = "a b c d"
ROW = re.compile(r"(\d+) “(.+?)” (\S+)")  # one "position “token” score" entry


def _script() -> None:
    """What the step fragment does: the current translation, then (as the Attribution page would, when
    session_state['ig_points'] is set) every attribution, then the step's view."""
    import streamlit as st

    from attnscope.ui import models, results, state
    from attnscope.ui.attribution.sentence import sentence_attribution, step_contributions
    from attnscope.ui.query import Query

    tr = models.translator()
    query = Query.of(tr, st.session_state["sentence"], 1, tr.model.config.max_len)
    result = results.translate(tr, query)
    if st.session_state.get("ig_points"):
        sentence_attribution(tr, query, result, (0.05, st.session_state["ig_points"]))
    step_contributions(tr, state.read(), query, result, st.session_state["step"])


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The integrated-gradients budget (path points, 0: none) of every attribution computed (the one costly call)."""
    seen: list[int] = []
    real = attribution_tools.attribute

    def counted(tr, result, ig, *rest):
        seen.append(ig.max_points if ig else 0)
        return real(tr, result, ig, *rest)

    monkeypatch.setattr(attribution_tools, "attribute", counted)
    return seen


@pytest.fixture
def step(toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(toy_checkpoint_dir))
    st.cache_data.clear()
    st.cache_resource.clear()
    app = AppTest.from_function(_script, default_timeout=CEILING)
    app.session_state["sentence"], app.session_state["step"], app.session_state["layer"] = SENTENCE, 1, 1
    return app


@pytest.fixture(scope="module")
def expected(toy_checkpoint_dir: Path) -> dict:
    """The engine's measures of the toy translation, each from its own function."""
    from attnscope.checkpoints import checkpoint
    from attnscope.engine.attribution.alti import alti_plus
    from attnscope.engine.attribution.norms import layer_norms
    from attnscope.engine.attribution.quadrature import IGSettings
    from attnscope.engine.attribution.saliency import saliency
    from attnscope.engine.attribution.value_zeroing import value_zeroing
    from attnscope.engine.decoding.translator import Translator
    from attnscope.engine.recording.trace import decoder_inputs
    from attnscope.engine.recording.tracer import trace

    tr = Translator(*checkpoint.load(next(toy_checkpoint_dir.glob("*.safetensors"))))
    result = tr.translate(SENTENCE, max_len=tr.model.config.max_len)
    src, tgt = result.source_ids, result.target_ids
    vz, split = value_zeroing(tr, result), alti_plus(tr, result)
    with tr.inference():
        norms = layer_norms(trace(tr.model, src, decoder_inputs(tgt, tr.model.config.bos_id)), "cross")[1]
        gxi, ig = saliency(tr.model, src, tgt), saliency(tr.model, src, tgt, IGSettings(max_points=16))
    return {"result": result, "split": split.source_share, "prefix": split.prefix, "value zeroing": vz.source,
            "ALTI+": split.source, "attention (layer 1)": result.attention.mean_over_heads("cross", 1),
            "norm-based (layer 1)": norms, "gradient × input": np.abs(gxi.source),
            f"integrated gradients ({ig.points} path points)": np.abs(ig.source)}


def table(app: AppTest) -> dict[str, tuple[list[tuple[int, str, float]], str, str]]:
    """Method -> (top source tokens, Spearman, same top token) from the step's markdown table."""
    text = next(shown(m) for m in app.markdown if shown(m).startswith("| method"))
    rows = {}
    for line in text.splitlines()[2:]:
        method, tokens, rho, same = (cell.strip() for cell in line.strip("|").split("|"))
        rows[method] = ([(int(j), tok, float(v)) for j, tok, v in ROW.findall(tokens)], rho, same)
    return rows


def check_step(app: AppTest, expected: dict, t: int, methods: set[str]) -> None:
    """The split, every method's top source tokens and its agreement equal the engine's numbers for step t."""
    result = expected["result"]
    split = next(shown(m) for m in app.markdown if shown(m).startswith(f"**Step {t} → “{result.output_tokens[t]}”**"))
    share = float(expected["split"][t])
    assert f"drew **{share:.0%}** on the source and **{1 - share:.0%}** on the target prefix" in split
    prefix = expected["prefix"][t, : t + 1]  # step t reads the decoder inputs 0..t
    most = np.argsort(-prefix, kind="stable")[:2]
    assert "(most: " + " · ".join(f"{j} “{result.target_tokens[j]}” {prefix[j]:.1%}" for j in most) + ")" in split
    rows = table(app)
    assert set(rows) == methods
    for method, (top, rho, same) in rows.items():
        scores = expected[method][t]
        order = np.argsort(-scores, kind="stable")[:3]
        assert [j for j, _, _ in top] == order.tolist()
        assert [tok for _, tok, _ in top] == [result.source_tokens[j] for j in order]
        np.testing.assert_allclose([v for _, _, v in top], scores[order], rtol=5e-3)
        if method == "value zeroing":
            assert (rho, same) == ("—", "—")
            continue
        reference = expected["value zeroing"][t]
        assert float(rho) == pytest.approx(spearmanr(scores, reference).statistic, abs=5e-3)
        assert same == ("yes" if scores.argmax() == reference.argmax() else "no")


BASIC = {"attention (layer 1)", "norm-based (layer 1)", "ALTI+", "value zeroing", "gradient × input"}


def test_toggle_off_draws_nothing_and_computes_nothing(step: AppTest, calls: list) -> None:
    step.run()
    assert not step.exception
    assert step.toggle(key="step_attr").value is False
    assert not step.markdown and not step.caption
    assert calls == []


def test_toggle_on_shows_the_split_and_top_tokens_and_steps_only_slice(step: AppTest, calls: list, expected) -> None:
    step.run()
    step.toggle(key="step_attr").set_value(True).run()
    assert not step.exception
    check_step(step, expected, 1, BASIC)
    assert any("Integrated gradients appear here once computed" in c.value for c in step.caption)
    for t in (0, 2):
        step.session_state["step"] = t
        step.run()
        check_step(step, expected, t, BASIC)
    assert calls == [0]  # one attribution of the sentence, without integrated gradients (0 steps)


def test_integrated_gradients_join_once_computed_for_this_sentence(step: AppTest, calls: list, expected) -> None:
    step.session_state["ig_points"] = 16  # the Attribution page computed every attribution, IG with 16 path points at most
    step.run()
    step.toggle(key="step_attr").set_value(True).run()
    assert not step.exception
    named = next(m for m in expected if m.startswith("integrated gradients"))
    check_step(step, expected, 1, BASIC | {named})
    assert calls == [16]  # the Attribution page's result, reused


def test_another_sentence_does_not_reuse_integrated_gradients(step: AppTest, calls: list) -> None:
    step.session_state["ig_points"] = 16
    step.run()
    step.session_state["ig_points"] = 0  # now only the Step page, on another sentence
    step.session_state["sentence"] = "d c b a"
    step.toggle(key="step_attr").set_value(True).run()
    assert not step.exception
    assert set(table(step)) == BASIC
    assert calls == [16, 0]
