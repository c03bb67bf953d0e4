"""Checkpoints trained by the real OpenNMT-py 3.5.1 and fairseq 0.12.2 import into models that compute what the
frameworks computed, checked on what their own command-line tools output.

tests/fixtures/frameworks/ holds a tiny model trained by each framework's own CLI (its transformer recipe at
tiny sizes, defaults otherwise) and, for the first 20 Multi30k test sentences, what its own translation CLI
output with its defaults, greedy and beam 4: the tokens, the scores, per-token log-probs and the attention the
framework exposes (outputs.json says which). regenerate.py there makes them in venvs of their own; nothing here
imports a framework. Each checkpoint is imported as docs/importing.md says (`python -m attnscope import FILE --out
X.safetensors`, no other flag); teacher-forced on the framework's outputs, log-probs agree within 5e-4 and
attention within 1e-4; decoding by the rules recorded at import (the framework's defaults: its length limit,
forced </s>, length penalty and when a beam search ends) gives its greedy outputs on 20/20 sentences and its beam-4
outputs on at least 19/20 (the fairseq folder is fairseq-preprocess's destdir, whose binarised test files name
the language pair that two dictionaries of one size cannot).
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
from tests.support import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "frameworks"


@dataclass(frozen=True)
class Framework:
    """Where a framework's fixtures are and how its outputs map onto attnscope's."""

    folder: str
    checkpoint: str
    attention: Callable[[np.ndarray], np.ndarray]  # cross-attention (layers, heads, T, S) -> what the framework dumps


FRAMEWORKS = {
    "OpenNMT-py": Framework("opennmt", "model_step_1000.pt", lambda cross: cross[-1, 0]),
    "fairseq": Framework("fairseq", "checkpoint_best.pt", lambda cross: cross[-1].mean(0)),
}
Case = tuple[Translator, dict[str, Any], Framework]


@pytest.fixture(scope="module", params=list(FRAMEWORKS))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    """The framework's checkpoint imported by docs/importing.md's command, with no flag but --out, and loaded back."""
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
    return ids + [tr.model.config.eos_id] * sentence["eos"]


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
        eos = [tr.model.config.eos_id] * (not sentence["eos"])  # both scored the cut ones with </s> added
        ours = tr.hypothesis(source, ids + eos)
        log_probs = np.log([step.prob for step in ours.steps])
        assert np.abs(log_probs - sentence["log_probs"]).max() <= 5e-4, source
        theirs = np.asarray(sentence["attention"])  # OpenNMT-py's beam search cuts some rows short (outputs.json)
        attention = framework.attention(ours.attention.cross)
        assert len(theirs) in (len(attention), len(attention) - 1) and theirs.shape[1] <= attention.shape[1], source
        assert np.abs(attention[: len(theirs), : theirs.shape[1]] - theirs).max() <= 1e-4, source


@pytest.mark.parametrize("mode, beam, at_least", [("greedy", 1, 20), ("beam4", 4, 19)])
def test_default_decoding_gives_the_frameworks_outputs(case: Case, mode: str, beam: int, at_least: int) -> None:
    """No maximum given: the rules the import recorded decide the length, the forced </s> and the beam's end."""
    tr, dumps, _ = case
    same = [tr.translate(source, beam_size=beam, capture=False).target_ids == tuple(target_ids(tr, s))
            for source, s in zip(sources(), dumps[mode]["sentences"])]
    assert sum(same) >= at_least, [i for i, ok in enumerate(same) if not ok]
