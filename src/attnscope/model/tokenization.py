"""Subword tokenizers (HF `tokenizers`) that travel inside checkpoints.

Multi30k models use one joint BPE vocabulary for both languages: with 29k training
sentences a shared vocabulary lets names, numbers and cognates map to the same pieces,
and lets the model share one embedding matrix for source, target and output (fewer
parameters on a small corpus). Toy tasks use a word-level vocabulary of their symbols.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from attnscope.model.config import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID

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
class TextCodec:
    """Text <-> ids for one side of a translation pair, with readable token pieces."""

    tokenizer: Tokenizer

    def __post_init__(self) -> None:
        for want, token in zip((PAD_ID, BOS_ID, EOS_ID, UNK_ID), SPECIAL_TOKENS):
            if self.tokenizer.token_to_id(token) != want:
                raise TokenizerError(f"tokenizer must have {token} at id {want}")

    @classmethod
    def from_json(cls, text: str) -> "TextCodec":
        try:
            return cls(Tokenizer.from_str(text))
        except TokenizerError:
            raise
        except Exception as err:  # tokenizers raises a bare Exception on bad JSON
            raise TokenizerError(f"tokenizer JSON does not parse ({str(err).splitlines()[0][:200]})") from None

    def to_json(self) -> str:
        return self.tokenizer.to_str()

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Subword ids of `text`, without special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of `ids`, dropping special tokens and everything after the first <eos>."""
        return self.tokenizer.decode(strip_specials(ids), skip_special_tokens=False).strip()

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """Readable labels: word starts without the marker, continuations prefixed with ##."""
        tokens = (self.tokenizer.id_to_token(i) or "<unk>" for i in ids)
        return list(readable_pieces(tokens, self.marks_word_starts))

    @cached_property
    def marks_word_starts(self) -> bool:
        """Whether pieces carry word-start markers (subword vocabularies) or not (word level)."""
        return any(t.startswith(WORD_START) for t in self.tokenizer.get_vocab())

    def unknown_characters(self, text: str) -> list[str]:
        """Characters of `text` that the tokenizer maps to <unk> (shown to users as a warning)."""
        enc = self.tokenizer.encode(text, add_special_tokens=False)
        found: list[str] = []
        for token_id, (start, end) in zip(enc.ids, enc.offsets):
            piece = text[start:end].strip()
            if token_id == UNK_ID and piece and piece not in found:
                found.append(piece)
        return found


def strip_specials(ids: Iterable[int]) -> list[int]:
    """Ids up to the first <eos>, without <bos>/<pad>."""
    kept = []
    for i in ids:
        if i == EOS_ID:
            break
        if i not in (BOS_ID, PAD_ID):
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
