"""Tokenizers: round trips, special ids, readable pieces, clear errors."""
from __future__ import annotations

import pytest

from attnscope.model.config import BOS_ID, EOS_ID, PAD_ID
from attnscope.model.tokenization import TextCodec, TokenizerError, strip_specials, train_bpe, train_word_level

CORPUS = ["A man rides a red bike down the street.", "Two dogs are running through the snow!",
          "Ein Mann fährt ein rotes Fahrrad.", "Zwei Hunde rennen durch den Schnee."] * 10


@pytest.fixture(scope="module")
def codec() -> TextCodec:
    return TextCodec(train_bpe(CORPUS, 120))


def test_round_trip_and_special_ids(codec: TextCodec) -> None:
    for text in ("A man rides a bike.", "Zwei Hunde rennen!", "the dog! the dog."):
        assert codec.decode(codec.encode(text)) == text
    assert [codec.tokenizer.token_to_id(t) for t in ("<pad>", "<bos>", "<eos>", "<unk>")] == [0, 1, 2, 3]
    assert codec.decode([1, *codec.encode("A man"), 2, 5, 6]) == "A man"


def test_pieces_are_readable(codec: TextCodec) -> None:
    pieces = codec.pieces(codec.encode("A man rides."))
    assert pieces[0] == "A" and pieces[-1] == "."
    assert not any("▁" in p for p in pieces)
    assert any(p.startswith("##") for p in codec.pieces(codec.encode("Schneemann")))


def test_unknown_characters_are_reported(codec: TextCodec) -> None:
    assert codec.unknown_characters("A ☃ man 😀") == ["☃", "😀"]
    assert 3 in codec.encode("☃")


def test_word_level_round_trip() -> None:
    codec = TextCodec(train_word_level(["a b c", "d e"]))
    assert codec.decode(codec.encode("a b e")) == "a b e"
    assert codec.pieces(codec.encode("a b")) == ["a", "b"]


def test_bad_tokenizer_json_is_a_clear_error(codec: TextCodec) -> None:
    with pytest.raises(TokenizerError, match="does not parse"):
        TextCodec.from_json("{nope")
    broken = codec.to_json().replace('"<bos>"', '"<start>"')
    with pytest.raises(TokenizerError, match="it lacks <bos>"):
        TextCodec.from_json(broken)


def test_strip_specials() -> None:
    dropped = (BOS_ID, PAD_ID)
    assert strip_specials([BOS_ID, 5, PAD_ID, 6, EOS_ID, 7], EOS_ID, dropped) == [5, 6]
    assert strip_specials([5, 6], EOS_ID, dropped) == [5, 6]
    assert strip_specials([EOS_ID, 5], EOS_ID, dropped) == []
    assert strip_specials([9, 5, 3, 0, 6], 0, (9, 3)) == [5]
