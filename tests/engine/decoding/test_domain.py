"""Warnings about input far from training and output cut short."""
from __future__ import annotations

from attnscope.checkpoints.decoding_rules import fairseq_defaults, opennmt_defaults
from attnscope.engine.decoding.domain import input_notes, output_notes, target_language_note, trained_length, words
from attnscope.model.config import EOS_ID, UNK_ID, ModelConfig

CONFIG = ModelConfig(src_vocab_size=10, tgt_vocab_size=10)  # attnscope's own special ids


def test_trained_length_prefers_the_checkpoint_record() -> None:
    assert trained_length({"task": "multi30k"}) == 40
    assert trained_length({"task": "multi30k", "longest_source": 25}) == 25
    assert trained_length({"task": "something else"}) is None


def test_long_input_and_unknown_pieces_are_flagged() -> None:
    summary = {"task": "multi30k", "data": "Multi30k task 1"}
    assert input_notes(summary, CONFIG, [5] * 40 + [EOS_ID]) == []
    (note,) = input_notes(summary, CONFIG, [5] * 77 + [EOS_ID])
    assert note.startswith("This input has 77 tokens; Multi30k task 1 trained this model on inputs of at most about 40")
    (unknown,) = input_notes(summary, CONFIG, [5, UNK_ID, UNK_ID, 6, EOS_ID])
    assert unknown.startswith("2 of 4 input tokens are unknown")
    assert input_notes(summary, CONFIG, [5] * 20 + [UNK_ID, EOS_ID]) == []  # one rare word is not "far outside"


def test_output_at_the_length_limit_or_far_too_short_is_flagged() -> None:
    (cut,) = output_notes(CONFIG, [5, 6, 7, EOS_ID], [8, 9, 10], max_len=3)
    assert "stopped at the maximum of 3 tokens" in cut
    (auto,) = output_notes(CONFIG, [5, 6, 7, EOS_ID], [8, 9, 10], max_len=3, chosen=False)
    assert "default budget (twice the source plus 10) of 3 tokens" in auto
    assert output_notes(CONFIG, [5, 6, 7, EOS_ID], [8, 9, 10, EOS_ID], max_len=3) == []
    (short,) = output_notes(CONFIG, [5] * 30 + [EOS_ID], [8] * 10 + [EOS_ID], max_len=100)
    assert "10 tokens for 30 input tokens" in short
    assert output_notes(CONFIG, [5] * 30 + [EOS_ID], [8] * 25 + [EOS_ID], max_len=100) == []


def test_the_notes_name_the_rules_limit_and_a_forced_eos() -> None:
    (auto,) = output_notes(CONFIG, [5, 6, 7], [8, 9, 10], max_len=3, chosen=False, rules=opennmt_defaults())
    assert "stopped at the default budget (OpenNMT-py defaults) of 3 tokens" in auto
    (forced,) = output_notes(CONFIG, [5, EOS_ID], [8, 9, EOS_ID], max_len=3, chosen=False, rules=fairseq_defaults(1024))
    assert "reached the default budget (fairseq defaults) of 3 tokens, where the decoding rules force </s>" in forced
    assert output_notes(CONFIG, [5, EOS_ID], [8, 9, EOS_ID], max_len=4, rules=fairseq_defaults(1024)) == []

ENGLISH = frozenset({"a", "man", "rides", "bike", "the", "park", "dog"})
GERMAN = frozenset({"ein", "mann", "fährt", "fahrrad", "hund", "park", "man"})


def test_words_are_lowercased_letter_runs() -> None:
    assert words("Ein Mann fährt Fahrrad, 2x!") == ["ein", "mann", "fährt", "fahrrad", "x"]


def test_target_language_input_gets_a_note_and_source_language_input_none() -> None:
    note = target_language_note("Ein Mann fährt Fahrrad.", "en", "de", ENGLISH, GERMAN)
    assert note.startswith("This sentence looks like German") and "4 of its 4 words (ein, mann, fährt, fahrrad)" in note
    assert target_language_note("A man rides a bike.", "en", "de", ENGLISH, GERMAN) is None
    # words both lists know ("park", "man") tell nothing; one German word among English ones is no reason
    assert target_language_note("A dog in the park with a Hund.", "en", "de", ENGLISH, GERMAN) is None
    assert target_language_note("Ein Mann im park", "en", "de", ENGLISH, GERMAN) is not None
    assert target_language_note("Ein Mann.", "en", "en", GERMAN, GERMAN) is None  # a same-language model
    assert target_language_note("Ein Mann.", "en", "de", frozenset(), frozenset()) is None  # no word lists


def test_the_notes_read_the_special_ids_from_the_config() -> None:
    moved = ModelConfig(src_vocab_size=10, tgt_vocab_size=10, pad_id=1, bos_id=0, eos_id=3, unk_id=2)
    summary = {"task": "multi30k"}
    (unknown,) = input_notes(summary, moved, [5, 2, 2, 6, 3])
    assert "2 of 4 input tokens" in unknown
    assert output_notes(moved, [5, 6, 7, 3], [8, 9, 3], max_len=3) == []
    assert output_notes(moved, [5, 6, 7, 3], [8, 9, 2], max_len=3)
