"""Checkpoints trained by the real OpenNMT-py 3.5.1 and fairseq 0.12.2 import into models that compute what the
frameworks computed, checked on what their own command-line tools output.

tests/fixtures/frameworks/ holds a tiny model trained by each framework's own CLI (its transformer recipe at
tiny sizes, defaults otherwise) and, for the first 20 Multi30k test sentences, what its own translation CLI
output with its defaults, greedy and beam 4: the tokens, the scores, per-token log-probs and the attention the
framework exposes (outputs.json says which). regenerate.py there makes them in venvs of their own; nothing here
imports a framework. Each checkpoint is imported as the README says (`python -m attnscope import FILE --out
X.safetensors`, no other flag); teacher-forced on the framework's outputs, log-probs agree within 5e-4 and
attention within 1e-4; decoding with the framework's length limit gives its greedy outputs on 20/20 sentences
and its beam-4 outputs on at least 19/20 (a strict xfail until attnscope's beam search follows each framework's
rules, KNOWN says where it differs today; the fairseq folder is fairseq-preprocess's destdir, whose binarised
test files name the language pair that two dictionaries of one size cannot).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import attnscope
from attnscope.cli.import_model import main as import_main
from attnscope.engine.decoding.translator import Translator
from attnscope.model.config import EOS_ID
from tests.support import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "frameworks"


@dataclass(frozen=True)
class Framework:
    """Where a framework's fixtures are and how its outputs map onto attnscope's."""

    folder: str
    checkpoint: str
    attention: Callable[[np.ndarray], np.ndarray]  # cross-attention (layers, heads, T, S) -> what the framework dumps
    forces_eos: bool  # </s> after max_len tokens (fairseq), or none (OpenNMT-py, attnscope: max_len counts </s> too)


FRAMEWORKS = {
    "OpenNMT-py": Framework("opennmt", "model_step_1000.pt", lambda cross: cross[-1, 0], forces_eos=False),
    "fairseq": Framework("fairseq", "checkpoint_best.pt", lambda cross: cross[-1].mean(0), forces_eos=True),
}
Case = tuple[Translator, dict[str, Any], Framework]


@pytest.fixture(scope="module", params=list(FRAMEWORKS))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    """The framework's checkpoint imported by the README's command, with no flag but --out, and loaded back."""
    framework = FRAMEWORKS[request.param]
    out = tmp_path_factory.mktemp(framework.folder) / "imported.safetensors"
    assert import_main([str(FIXTURES / framework.folder / framework.checkpoint), "--out", str(out)]) == 0
    dumps = json.loads((FIXTURES / framework.folder / "outputs.json").read_text(encoding="utf-8"))
    return attnscope.load(out), dumps, framework


def sources() -> list[str]:
    return (FIXTURES / "test.en").read_text(encoding="utf-8").splitlines()


def target_ids(tr: Translator, sentence: dict[str, Any]) -> list[int]:
    """The framework's output as attnscope ids, ending with </s> where the framework's did."""
    ids = tr.bundle.tgt_codec.encode(" ".join(sentence["tokens"]))
    assert len(ids) == len(sentence["tokens"])
    return ids + [EOS_ID] * sentence["eos"]


def expected_output(tr: Translator, framework: Framework, sentence: dict[str, Any]) -> tuple[int, ...]:
    """The framework's output as attnscope decodes it given the same limit: a fairseq output cut at max_len tokens
    without the </s> fairseq forces there (attnscope stops without forcing one, as the README says)."""
    ids = target_ids(tr, sentence)
    cut = framework.forces_eos and len(sentence["tokens"]) == sentence["max_len"]
    return tuple(ids[:-1] if cut else ids)


def test_the_fixtures_are_twenty_sentences_in_both_modes(case: Case) -> None:
    _, dumps, _ = case
    assert len(sources()) == 20
    for mode in ("greedy", "beam4"):
        assert len(dumps[mode]["sentences"]) == 20
        assert [s["cli"] for s in dumps[mode]["sentences"]] == [" ".join(s["tokens"]) for s in dumps[mode]["sentences"]]


@pytest.mark.parametrize("mode", ["greedy", "beam4"])
def test_log_probs_and_attention_are_the_frameworks_on_its_own_outputs(case: Case, mode: str) -> None:
    tr, dumps, framework = case
    for source, sentence in zip(sources(), dumps[mode]["sentences"]):
        ids = target_ids(tr, sentence)
        ours = tr.hypothesis(source, ids + [EOS_ID] * (not sentence["eos"]))  # both scored the cut ones with </s> added
        log_probs = np.log([step.prob for step in ours.steps])
        assert np.abs(log_probs - sentence["log_probs"]).max() <= 5e-4, source
        theirs = np.asarray(sentence["attention"])  # OpenNMT-py's beam search cuts some rows short (outputs.json)
        attention = framework.attention(ours.attention.cross)
        assert len(theirs) in (len(attention), len(attention) - 1) and theirs.shape[1] <= attention.shape[1], source
        assert np.abs(attention[: len(theirs), : theirs.shape[1]] - theirs).max() <= 1e-4, source


KNOWN = {  # what attnscope's beam search does otherwise today (engine/decoding is taking the frameworks' rules)
    "opennmt": "OpenNMT-py's beam search ends when its best beam finishes, attnscope's once 4 hypotheses have: 17/20 "
               "(sentences 5, 10, 15 come out longer, with better average log-probs)",
    "fairseq": "fairseq's beam search forces </s> at max_len and ranks the beams with it, attnscope's stops there without "
               "one: 18/20 (sentences 5 and 7, which the tiny model repeats up to the limit of 200 tokens)",
}


@pytest.mark.parametrize("mode, beam, at_least", [("greedy", 1, 20), ("beam4", 4, 19)])
def test_outputs_are_the_frameworks_given_its_length_limit(case: Case, mode: str, beam: int, at_least: int,
                                                           request: pytest.FixtureRequest) -> None:
    tr, dumps, framework = case
    if beam > 1:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN[framework.folder]))
    same = [tr.translate(source, beam_size=beam, max_len=s["max_len"], capture=False).target_ids
            == expected_output(tr, framework, s) for source, s in zip(sources(), dumps[mode]["sentences"])]
    assert sum(same) >= at_least, [i for i, ok in enumerate(same) if not ok]
