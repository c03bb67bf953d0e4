"""A tokenizer made elsewhere, mapped onto the model's ids (TextCodec with an IdMap): encoding, decoding as the
original decodes, labels, and the round trip through a checkpoint's metadata. No transformers needed."""
from __future__ import annotations

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from attnscope.model.config import EOS_ID, UNK_ID
from attnscope.model.tokenization import CLEANUP, IdMap, TextCodec, TokenizerError

# The original tokenizer's own ids: specials in its order (</s> first, <pad> last, as Marian's), pieces between.
ORIGINAL = ["</s>", "<unk>", "▁Ein", "▁Hund", "e", "▁.", "de_DE", "Z", "<pad>"]
OURS = ["<pad>", "<bos>", "<eos>", "<unk>", "▁Ein", "▁Hund", "e", "▁.", "de_DE", "Z"]  # specials at 0-3, a <bos> added


def codec(**kw: object) -> TextCodec:
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(ORIGINAL)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.Metaspace()
    ids = tuple(OURS.index(t if t not in ("</s>", "<pad>") else {"</s>": "<eos>", "<pad>": "<pad>"}[t]) for t in ORIGINAL)
    return TextCodec(tok, IdMap(ids, tuple(OURS), **kw))


def test_ids_are_the_models_and_decoding_follows_the_original() -> None:
    c = codec(hidden=frozenset({UNK_ID, 8}), strip=True, replace=CLEANUP)
    assert c.vocab_size == len(OURS)
    assert c.encode("▁Ein ▁Hund e ▁. Q") == [4, 5, 6, 7, UNK_ID]
    assert c.decode([8, 4, 5, 6, UNK_ID, 7, EOS_ID, 4]) == "Ein Hunde."  # de_DE and <unk> dropped, " ." cleaned up
    assert codec().decode([4, 5, 6, 7]) == "Ein Hunde ."


def test_unknown_pieces_are_looked_up_by_text_when_the_original_does() -> None:
    """The model knows "Z" (a target piece of a joint vocabulary) though this SentencePiece-like tokenizer reads it as
    <unk>; a Unigram model reports an unknown piece's text, as sentencepiece does."""
    tok = Tokenizer(models.Unigram([("<unk>", 0.0), ("▁Ein", -1.0), ("▁", -2.0)], unk_id=0))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    by_text = TextCodec(tok, IdMap((UNK_ID, 4, UNK_ID), tuple(OURS), unknown_by_text=True))
    assert by_text.encode("Ein Z Q") == [4, UNK_ID, OURS.index("Z"), UNK_ID, UNK_ID]  # ▁ Z ▁ Q: "▁" unknown to the model
    assert by_text.unknown_characters("Ein Z Q") == ["Q"]
    assert TextCodec(tok, IdMap((UNK_ID, 4, UNK_ID), tuple(OURS))).encode("Ein Z") == [4, UNK_ID, UNK_ID]


def test_labels_show_specials_and_language_codes_as_they_are() -> None:
    c = codec(codes=frozenset({8}))
    assert c.pieces([8, 4, 6, EOS_ID]) == ["de_DE", "Ein", "##e", "<eos>"]


def test_the_map_round_trips_and_bad_maps_are_refused() -> None:
    c = codec(hidden=frozenset({3}), strip=True, replace=CLEANUP, unknown_by_text=True, codes=frozenset({8}))
    again = TextCodec.from_json(c.to_json(), c.id_map.to_json())
    assert again.id_map == c.id_map and again.encode("▁Hund e") == c.encode("▁Hund e")
    with pytest.raises(TokenizerError, match="must name <pad>, <eos>, <unk> once each"):
        IdMap((0,), ("a", "b", "c", "d"))
    with pytest.raises(TokenizerError, match="points past the model's 10 tokens"):
        IdMap((12,), tuple(OURS))
    with pytest.raises(TokenizerError, match="covers 2 ids but the tokenizer has 9"):
        TextCodec(c.tokenizer, IdMap((0, 1), tuple(OURS)))
    with pytest.raises(TokenizerError, match="not valid JSON"):
        IdMap.from_json("{")


def test_specials_are_found_by_name_wherever_the_vocabulary_puts_them() -> None:
    moved = ("a", "<unk>", "<eos>", "b", "<pad>", "c")  # no <bos>: a model whose decoder starts elsewhere (Marian)
    raw = Tokenizer(models.WordLevel({"a": 0, "b": 1, "c": 2, "?": 3}, unk_token="?"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    c = TextCodec(raw, IdMap((0, 3, 5, 1), moved))
    assert c.specials == {"pad": 4, "eos": 2, "unk": 1}
    assert c.decode([0, 4, 3, 2, 5]) == "a b"  # <pad> dropped, everything after <eos> too
    assert c.encode("a x c") == [0, 1, 5]
