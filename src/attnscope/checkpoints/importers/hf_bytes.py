"""ByT5's tokenizer as an attnscope TextCodec: every UTF-8 byte of the text is one token, id byte + 3.

ByT5Tokenizer is plain Python in transformers (no tokenizer.json to copy), so the same cut is built in `tokenizers`:
the ByteLevel pre-tokenizer turns each byte into one character (GPT-2's byte alphabet, without its regex split or
prefix space) and a BPE model without merges gives each character its id. The original's special tokens (<pad>,
</s>, <unk>, <extra_id_N>) are added tokens at the original's ids, matched in the text as the original matches
them (the first three taking the spaces around them). Decoding joins the bytes and drops any that form no
character, as ByT5Tokenizer does (`errors="ignore"`); tokens are labelled as bytes (IdMap.utf8).
"""
from __future__ import annotations

from typing import Any

from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.hf_tokenizers import id_map
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model.tokenization import TextCodec, byte_label

BYTES = 256


def byte_alphabet() -> list[str]:
    """The character the ByteLevel pre-tokenizer writes for each byte (GPT-2's reversible byte-to-unicode table):
    printable Latin-1 bytes stand for themselves, the others for 256 + their rank."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(BYTES):
        if b in kept:
            chars[b] = chr(b)
        else:
            chars[b] = chr(BYTES + extra)
            extra += 1
    return [chars[b] for b in range(BYTES)]


def byte_codec(tok: Any, plan: VocabPlan) -> TextCodec:
    """A ByT5Tokenizer as a TextCodec on the model's ids (`plan`: the original's order)."""
    offset = int(getattr(tok, "offset", 3))
    added = {int(i): t for i, t in tok.added_tokens_decoder.items()}
    if any(offset <= i < offset + BYTES for i in added):
        raise CheckpointError("this ByT5 tokenizer's special tokens overlap its byte ids: attnscope cannot reproduce it")
    vocab = {char: offset + b for b, char in enumerate(byte_alphabet())}
    for i, token in added.items():
        vocab[str(token)] = i
    raw = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    raw.add_special_tokens([AddedToken(str(t), lstrip=bool(t.lstrip), rstrip=bool(t.rstrip), normalized=False,
                                       single_word=bool(t.single_word), special=True) for _, t in sorted(added.items())])
    size = raw.get_vocab_size(with_added_tokens=True)
    labels = {offset + b: byte_label(b) for b in range(BYTES)} | {i: str(t) for i, t in added.items()}
    hidden = {i for i, t in added.items() if t.special or str(t) in tok.all_special_tokens}
    return TextCodec(raw, id_map(list(range(size)), plan, labels.get, hidden, strip=False,
                                 utf8=True))
