"""Subword tokenizers (HF `tokenizers`) that travel inside checkpoints.

Multi30k models use one joint BPE vocabulary for both languages: with 29k training
sentences a shared vocabulary lets names, numbers and cognates map to the same pieces,
and lets the model share one embedding matrix for source, target and output (fewer
parameters on a small corpus). Toy tasks use a word-level vocabulary of their symbols.

A model imported from Hugging Face keeps its own tokenizer (its pieces and ids, so text is cut
exactly as the original cuts it) with an `IdMap` onto the model's ids, where pieces the model lacks
read as <unk>; decoding then follows the original's `decode(ids, skip_special_tokens=True)`. A codec's
special tokens are found by their names (SPECIAL_TOKENS) wherever its vocabulary puts them: attnscope's
own tokenizers at 0-3, an imported model's at the original's ids (its config names the same ids).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from attnscope.model import untrusted
from attnscope.model.config import SPECIAL_TOKENS

WORD_START = "▁"  # SentencePiece-style marker the Metaspace pre-tokenizer puts before each word
CONTINUATION = "##"  # how continuation pieces are shown to users (BERT's convention)


class TokenizerError(ValueError):
    """A tokenizer file does not parse or lacks the special tokens attnscope needs."""


def train_bpe(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train a BPE tokenizer with word-start markers and the attnscope special tokens."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    # Split punctuation off words (kept reversible: a piece without the marker joins the word).
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  min_frequency=2, show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def train_word_level(texts: Iterable[str]) -> Tokenizer:
    """A whitespace word-level tokenizer (toy tasks: every symbol is one token)."""
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="\x00")  # joins tokens with spaces
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=list(SPECIAL_TOKENS)))
    return tok


@dataclass(frozen=True)
class IdMap:
    """A tokenizer made elsewhere (Hugging Face) on the model's ids, and how its decode() reads them back."""

    ids: tuple[int, ...]  # the model's id of each tokenizer id (<unk> for pieces the model lacks)
    tokens: tuple[str, ...]  # the token of each model id; the specials under SPECIAL_TOKENS' names (<bos> optional)
    hidden: frozenset[int] = field(default_factory=frozenset)  # model ids decode() drops: the original's specials
    strip: bool = False  # decode() strips surrounding spaces (transformers' SentencePiece tokenizers do)
    replace: tuple[tuple[str, str], ...] = ()  # decode()'s text replacements, in order: transformers'
    #   clean_up_tokenization_spaces (CLEANUP), or subword-nmt's "@@ " joiner (fairseq, OpenNMT-py)
    unknown_by_text: bool = False  # a piece read as <unk> is looked up by its text among `tokens` (transformers'
    #   SentencePiece tokenizers look pieces up in vocab.json by text, so a character the source model lacks
    #   may still have a target piece of a joint vocabulary)
    codes: frozenset[int] = field(default_factory=frozenset)  # language codes: labelled as they are, like specials
    utf8: bool = False  # tokens are UTF-8 bytes (ByT5), labelled by byte_label: decode() joins their bytes and drops
    #   those that form no character, as ByT5Tokenizer does

    def __post_init__(self) -> None:
        needed = [t for t in SPECIAL_TOKENS if t != SPECIAL_TOKENS[1]]  # a model may have no <bos> (Marian)
        if any(self.tokens.count(t) != 1 for t in needed) or self.tokens.count(SPECIAL_TOKENS[1]) > 1:
            raise TokenizerError(f"an id map must name {', '.join(needed)} once each (and <bos> at most once)")
        if any(not 0 <= i < len(self.tokens) for i in [*self.ids, *self.hidden, *self.codes]):
            raise TokenizerError(f"an id map points past the model's {len(self.tokens)} tokens")

    def to_json(self) -> str:
        return json.dumps({"ids": list(self.ids), "tokens": list(self.tokens), "hidden": sorted(self.hidden),
                           "strip": self.strip, "replace": [list(r) for r in self.replace],
                           "unknown_by_text": self.unknown_by_text, "codes": sorted(self.codes), "utf8": self.utf8},
                          ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "IdMap":
        try:
            data: dict[str, Any] = untrusted.loads(text)
            return cls(tuple(int(i) for i in data["ids"]), tuple(str(t) for t in data["tokens"]),
                       frozenset(int(i) for i in data.get("hidden", ())), bool(data.get("strip")),
                       tuple((str(a), str(b)) for a, b in data.get("replace", ())), bool(data.get("unknown_by_text")),
                       frozenset(int(i) for i in data.get("codes", ())), bool(data.get("utf8")))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            raise TokenizerError("the tokenizer's id map is not valid JSON with ids and tokens") from None


@dataclass(frozen=True)
class TextCodec:
    """Text <-> ids for one side of a translation pair, with readable token pieces."""

    tokenizer: Tokenizer
    id_map: IdMap | None = None  # a tokenizer made elsewhere, mapped onto the model's ids (Hugging Face imports)

    def __post_init__(self) -> None:
        if self.id_map is not None:
            if len(self.id_map.ids) != self.tokenizer.get_vocab_size(with_added_tokens=True):
                raise TokenizerError(f"the id map covers {len(self.id_map.ids)} ids but the tokenizer has "
                                     f"{self.tokenizer.get_vocab_size(with_added_tokens=True)}")
            return
        missing = [token for token in SPECIAL_TOKENS if self.tokenizer.token_to_id(token) is None]
        if missing:
            raise TokenizerError(f"tokenizer must have the special tokens {', '.join(SPECIAL_TOKENS)}; it lacks "
                                 f"{', '.join(missing)}")

    @classmethod
    def from_json(cls, text: str, id_map: str | None = None) -> "TextCodec":
        try:
            return cls(Tokenizer.from_str(text), None if id_map is None else IdMap.from_json(id_map))
        except TokenizerError:
            raise
        except Exception as err:  # tokenizers raises a bare Exception on bad JSON
            raise TokenizerError(f"tokenizer JSON does not parse ({str(err).splitlines()[0][:200]})") from None

    def to_json(self) -> str:
        return self.tokenizer.to_str()

    @property
    def vocab_size(self) -> int:
        return len(self.id_map.tokens) if self.id_map else self.tokenizer.get_vocab_size()

    @cached_property
    def specials(self) -> dict[str, int]:
        """The ids of this vocabulary's special tokens by role (pad, bos, eos, unk), found by their names; a model
        without a <bos> of its own has none."""
        if self.id_map is not None:
            index = {t: i for i, t in enumerate(self.id_map.tokens) if t in SPECIAL_TOKENS}
        else:
            index = {t: self.tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
        return {role: index[t] for role, t in zip(("pad", "bos", "eos", "unk"), SPECIAL_TOKENS) if index.get(t) is not None}

    def _encoding(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """The model's ids of `text` and each one's character span."""
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        m = self.id_map
        if m is None:
            return enc.ids, enc.offsets
        ids = [m.ids[i] for i in enc.ids]
        if m.unknown_by_text:
            unk = self.specials["unk"]
            ids = [self._by_text.get(piece, unk) if i == unk else i for i, piece in zip(ids, enc.tokens)]
        return ids, enc.offsets

    @cached_property
    def _by_text(self) -> dict[str, int]:
        """The model's ids by token text, specials excepted (first id of a repeated text)."""
        tokens = self.id_map.tokens if self.id_map else ()
        found: dict[str, int] = {}
        for i, token in enumerate(tokens):
            if i not in self.specials.values():
                found.setdefault(token, i)
        return found

    def encode(self, text: str) -> list[int]:
        """Subword ids of `text`, without special tokens."""
        return self._encoding(text)[0]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`, dropping special tokens and everything after the first <eos>."""
        s = self.specials
        kept = strip_specials(ids, s["eos"], tuple(s[r] for r in ("bos", "pad") if r in s))
        if self.id_map is None:
            return self.tokenizer.decode(kept, skip_special_tokens=False).strip()
        m = self.id_map
        tokens = [m.tokens[i] for i in kept if i not in m.hidden]
        if m.utf8:
            text = b"".join(map(label_bytes, tokens)).decode("utf-8", errors="ignore")
        elif self.tokenizer.decoder is not None:
            text = self.tokenizer.decoder.decode(tokens)
        else:
            text = " ".join(tokens)
        for before, after in m.replace:
            text = text.replace(before, after)
        return text.strip() if m.strip else text

    def token(self, i: int) -> str:
        """The token of model id `i`."""
        if self.id_map is not None:
            return self.id_map.tokens[i] if 0 <= i < len(self.id_map.tokens) else SPECIAL_TOKENS[3]
        return self.tokenizer.id_to_token(i) or SPECIAL_TOKENS[3]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """Readable labels: word starts without the marker, continuations prefixed with ##; special tokens
        (language codes too) as they are."""
        ids = list(ids)
        tokens = [self.token(i) for i in ids]
        if self.byte_level:
            readable = list(byte_level_pieces(tokens, self.tokenizer.decoder))
        else:
            readable = list(readable_pieces(tokens, self.marks_word_starts))
        raw = self.id_map.hidden | self.id_map.codes if self.id_map else frozenset()
        return [token if i in raw else piece for i, token, piece in zip(ids, tokens, readable)]

    def piece(self, i: int) -> str:
        """The readable label of model id `i` on its own (`pieces` of one id): a figure's label for one token."""
        return self.pieces([i])[0]

    @cached_property
    def marks_word_starts(self) -> bool:
        """Whether pieces carry word-start markers (subword vocabularies) or not (word level)."""
        vocab = self.id_map.tokens if self.id_map else self.tokenizer.get_vocab()
        return any(t.startswith(WORD_START) for t in vocab)

    @cached_property
    def byte_level(self) -> bool:
        """Whether tokens are GPT-2 byte-level strings ('Ġman'), as BART's are."""
        return "ByteLevel" in type(self.tokenizer.decoder).__name__ if self.tokenizer.decoder is not None else False

    def unknown_characters(self, text: str) -> list[str]:
        """Characters of `text` that the tokenizer maps to <unk> (shown to users as a warning)."""
        found: list[str] = []
        for token_id, (start, end) in zip(*self._encoding(text)):
            piece = text[start:end].strip()
            if token_id == self.specials["unk"] and piece and piece not in found:
                found.append(piece)
        return found


# transformers' clean_up_tokenization, in its order
CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
           (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


SPACE_LABEL = "␣"  # how a byte-level model's space byte is labelled (a blank label would read as nothing)


def byte_label(b: int) -> str:
    """A byte's label: printable ASCII as itself, the space as ␣, any other byte as <0xHH>."""
    if b == 0x20:
        return SPACE_LABEL
    return chr(b) if 0x20 < b < 0x7F else f"<0x{b:02X}>"


def label_bytes(label: str) -> bytes:
    """The bytes a byte_label stands for (any other token, e.g. a sentinel, as its own UTF-8 text)."""
    if label == SPACE_LABEL:
        return b" "
    if len(label) == 6 and label.startswith("<0x") and label.endswith(">"):
        try:
            return bytes([int(label[3:5], 16)])
        except ValueError:
            pass
    return label.encode("utf-8")


def strip_specials(ids: Iterable[int], eos: int, dropped: tuple[int, ...]) -> list[int]:
    """Ids up to the first `eos`, without the `dropped` ones (<bos>, <pad>: the model config's or the vocabulary's)."""
    kept = []
    for i in ids:
        if i == eos:
            break
        if i not in dropped:
            kept.append(i)
    return kept


def readable_pieces(tokens: Iterable[str], marks_word_starts: bool = True) -> Iterator[str]:
    """Word starts lose their marker; continuations get ## unless they are punctuation."""
    for token in tokens:
        if not marks_word_starts or token in SPECIAL_TOKENS:
            yield token
        elif token.startswith(WORD_START):
            yield token[len(WORD_START):] or WORD_START
        elif all(not ch.isalnum() for ch in token):
            yield token
        else:
            yield CONTINUATION + token


def byte_level_pieces(tokens: Iterable[str], decoder: Any) -> Iterator[str]:
    """GPT-2 byte-level tokens as text: a leading space (or the first piece) marks a word start, others get ##."""
    first = True
    for token in tokens:
        if token in SPECIAL_TOKENS or (token.startswith("<") and token.endswith(">")):
            yield token
            continue
        text = decoder.decode([token])
        if text.startswith(" ") or first:
            yield text.removeprefix(" ") or WORD_START
        elif all(not ch.isalnum() for ch in text):
            yield text
        else:
            yield CONTINUATION + text
        first = False
