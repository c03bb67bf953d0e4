"""ByT5's byte tokenizer rebuilt in `tokenizers` cuts and decodes every text as transformers' ByT5Tokenizer does."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscope.checkpoints.importers.hf_bytes import byte_alphabet, byte_codec
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model.tokenization import TextCodec

transformers = pytest.importorskip("transformers")

TEXTS = ["A man rides a bike down the street.", "Zwei Hunde spielen im Schnee!", "  Spaces   and\ttabs .\n",
         "Ünïcödé ☃ café, naïve. 日本語 🙂👍🏽", "</s> in the middle </s>and <pad>  <unk>x", "<extra_id_0> sentinel <extra_id_7>",
         "", "\x00\x7f control", "translate English to German: The house is wonderful."]


@pytest.fixture(scope="module")
def tok() -> object:
    return transformers.ByT5Tokenizer()


@pytest.fixture(scope="module")
def codec(tok: object) -> TextCodec:
    return byte_codec(tok, VocabPlan.build(len(tok), pad=tok.pad_token_id, bos=None, eos=tok.eos_token_id,
                                           unk=tok.unk_token_id))


def test_the_alphabet_is_one_character_per_byte() -> None:
    chars = byte_alphabet()
    assert len(set(chars)) == 256 and chars[ord("a")] == "a" and chars[ord(" ")] == "Ġ"


@pytest.mark.parametrize("text", TEXTS)
def test_texts_cut_and_decode_as_byt5(tok: object, codec: TextCodec, text: str) -> None:
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert codec.encode(text) == ids
    body = [i for i in ids if i != tok.eos_token_id]
    assert codec.decode(body) == tok.decode(body, skip_special_tokens=True)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_text_cuts_as_byt5(tok: object, codec: TextCodec, text: str) -> None:
    assert codec.encode(text) == tok(text, add_special_tokens=False)["input_ids"]


def test_broken_byte_sequences_decode_as_byt5(tok: object, codec: TextCodec) -> None:
    """A model may output bytes that form no character (half of 'é', a lone continuation byte): dropped, as ByT5 does;
    the sentinels and <unk> too."""
    rng = random.Random(0)
    for _ in range(300):
        ids = [rng.choice([*range(3, 259), *range(3, 131), 2, 259, 300]) for _ in range(rng.randint(0, 12))]
        assert codec.decode(ids) == tok.decode(ids, skip_special_tokens=True)


def test_labels_are_bytes_and_survive_a_checkpoint(codec: TextCodec) -> None:
    ids = codec.encode("é a")
    assert codec.pieces(ids) == ["<0xC3>", "<0xA9>", "␣", "a"]
    again = TextCodec.from_json(codec.to_json(), codec.id_map.to_json())
    assert again.encode("é a") == ids and again.decode(ids) == "é a" and again.id_map.utf8
    assert codec.token(1) == "<eos>" and codec.token(0) == "<pad>" and codec.token(259) == "<extra_id_0>"


def test_output_rows_beyond_the_tokenizer_decode_to_nothing(tok: object) -> None:
    """A model with more rows than ByT5's tokens (a resized embedding): those rows have no token; transformers cannot
    decode them at all, attnscope shows them as such and drops them from the text."""
    plan = VocabPlan.build(len(tok) + 4, pad=tok.pad_token_id, bos=None, eos=tok.eos_token_id, unk=tok.unk_token_id)
    codec = byte_codec(tok, plan)
    ids = codec.encode("ab")
    assert codec.token(len(tok) + 2) == "<no token>" and codec.decode([*ids, len(tok) + 2, *ids]) == "abab"
