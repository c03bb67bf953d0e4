"""Decoding rules as data: each framework's defaults, generation_config read as transformers reads it, what the
checkpoint keeps of them, and one clear sentence for rules a file gets wrong."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import attnscope
from attnscope.checkpoints.checkpoint import CheckpointError, save
from attnscope.checkpoints.decoding_rules import (
    ATTNSCOPE,
    KEY,
    DecodingRules,
    RulesError,
    fairseq_defaults,
    hf_generation,
    opennmt_defaults,
    stored,
)
from attnscope.checkpoints.importers import import_any
from tests.checkpoints import reference_fairseq, reference_opennmt
from tests.checkpoints.test_fairseq import write_checkpoint
from tests.engine_fixtures import tiny_translator


@pytest.mark.parametrize("src_len", [1, 4, 7, 30, 196, 200, 400])
def test_the_length_rules_are_the_frameworks_formulas(src_len: int) -> None:
    assert opennmt_defaults().limit(src_len, 5000) == int(min(250, src_len * 1.25 + 5))
    assert fairseq_defaults(1024).limit(src_len, 5000) == min(int(0 * src_len + 200), 1024 - 1) + 1  # then </s>
    assert fairseq_defaults(64).limit(src_len, 5000) == 64
    assert ATTNSCOPE.limit(src_len, 256) == min(256, 2 * src_len + 10)


def test_length_penalties_divide_as_each_framework_does() -> None:
    assert ATTNSCOPE.with_penalty(0.6).divisor(5) == 5 ** 0.6
    assert opennmt_defaults().divisor(5) == 6.0  # "avg", alpha 1: the start token counts
    assert DecodingRules(penalty="gnmt", length_penalty=0.2).divisor(5) == ((5 + 6) / 6) ** 0.2
    assert DecodingRules(penalty="none", length_penalty=3.0).divisor(9) == 1.0


def test_generation_config_is_read_as_transformers_reads_it() -> None:
    opus = {"max_length": 512, "num_beams": 4, "forced_eos_token_id": 0, "bad_words_ids": [[58100]], "eos_token_id": 0}
    rules = hf_generation(opus.get, 0)
    assert (rules.limit(20, 10_000), rules.forced_eos, rules.beam_size, rules.finish) == (511, "certain", 4, "hf")
    summary = {"max_new_tokens": 30, "min_length": 12, "min_new_tokens": None, "length_penalty": 2.0,
               "no_repeat_ngram_size": 3, "early_stopping": True, "repetition_penalty": 1.2}
    rules = hf_generation(summary.get, 2)
    assert (rules.limit(5, 10_000), rules.min_len, rules.length_penalty, rules.no_repeat_ngram) == (30, 11, 2.0, 3)
    assert rules.finish == "k-finished" and rules.forced_eos == "off" and rules.ignored == ("repetition_penalty",)
    assert "not applied: repetition_penalty" in rules.sentence()
    # unset max_length: transformers 5 generates 20 new tokens (not max_length 20, the start token included)
    assert hf_generation({}.get, 2) == DecodingRules("the model's generation_config", len_a=0.0, len_b=20.0, finish="hf")
    assert hf_generation({"early_stopping": "never"}.get, 2).finish == "hf-never"
    sampled = hf_generation({"do_sample": True, "top_k": 10, "bad_words_ids": [[7], [8, 9]], "forced_eos_token_id": 5}.get, 2)
    assert sampled.ignored == ("do_sample", "top_k", "forced_eos_token_id", "bad_words_ids of several tokens")
    assert sampled.forced_eos == "off" and hf_generation({"top_k": 10}.get, 2).ignored == ()  # no sampling: top_k unused


def test_the_sentence_says_which_rule_is_in_force() -> None:
    assert ATTNSCOPE.sentence().startswith("Decoding follows attnscope: at most 2 x the source + 10 tokens")
    assert "at most 1.25 x the source + 5 tokens (never more than 250)" in opennmt_defaults().sentence()
    assert "log-prob / (length + 1)^1" in opennmt_defaults().sentence()
    assert "</s> forced at that limit" in fairseq_defaults(1024).sentence()
    assert "its default beam is 5" in fairseq_defaults(1024).sentence()


@pytest.mark.parametrize("data, field", [({"len_a": -1}, "len_a"), ({"finish": "soon"}, "finish"),
                                         ({"min_len": 1.5}, "min_len"), ({"speed": 1}, "speed"),
                                         ({"length_penalty": float("nan")}, "length_penalty"), ({"ignored": "x"}, "ignored")])
def test_bad_rules_are_refused_in_one_sentence(data: dict, field: str) -> None:
    with pytest.raises(RulesError, match=field):
        DecodingRules.from_dict(data)
    with pytest.raises(RulesError, match="JSON object"):
        DecodingRules.from_dict([1])


def test_rules_survive_save_and_load_and_older_checkpoints_get_attnscopes(tmp_path: Path) -> None:
    tr = tiny_translator(0)
    assert stored(tr.bundle.summary) == ATTNSCOPE and attnscope.load(tr.save(tmp_path / "old.safetensors")).rules == ATTNSCOPE
    tr.bundle.summary[KEY] = fairseq_defaults(512).to_dict()
    path = tr.save(tmp_path / "new.safetensors")
    assert attnscope.load(path).rules == fairseq_defaults(512)
    assert attnscope.load(path, rules="attnscope").rules == ATTNSCOPE
    tr.bundle.summary[KEY] = {"finish": "soon"}
    bad = save(tr.model, tr.bundle, tmp_path / "bad.safetensors")
    with pytest.raises(CheckpointError, match="decoding rules are not valid: decoding rule finish"):
        attnscope.load(bad)


def test_the_importers_record_their_frameworks_defaults(tmp_path: Path) -> None:
    onmt = tmp_path / "model_step_100.pt"
    words = reference_opennmt.SPECIALS + "a b c".split()
    torch.save(reference_opennmt.checkpoint(reference_opennmt.opt(), words, words), onmt)
    assert stored(import_any(onmt, src_lang="en", tgt_lang="de").bundle.summary) == opennmt_defaults()
    fairseq = write_checkpoint(tmp_path, reference_fairseq.args(max_target_positions=300))
    assert stored(import_any(fairseq).bundle.summary) == fairseq_defaults(300)
