"""Word alignment from cross-attention, exported in Pharaoh "i-j" format (source word i, target word j).

Each generated word is linked to the source word its attention favours (Garg et al. 2019's
argmax extraction), after merging subword pieces into words: a word's score for a source word
is its pieces' mean weight summed over that source word's pieces. Weight on special tokens
(<eos>, often an attention sink) counts as "no link": a target word whose strongest pull is a
special token stays unaligned.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from attnscope.model.tokenization import CONTINUATION
from attnscope.records.attention import AttentionRecord

NON_WORDS = ("<pad>", "<bos>", "<eos>")  # <unk> stands for a real (unknown) word and stays


@dataclass(frozen=True)
class Word:
    text: str
    pieces: tuple[int, ...]  # token positions that make up the word


@dataclass(frozen=True)
class WordAlignment:
    """Links between source and target words, with the word-level scores they came from."""

    source_words: tuple[Word, ...]
    target_words: tuple[Word, ...]
    scores: np.ndarray  # [target word, source word]
    links: tuple[tuple[int, int], ...]  # (source word, target word), sorted

    def pharaoh(self) -> str:
        """Links as "i-j" pairs separated by spaces (source index first, 0-based)."""
        return " ".join(f"{i}-{j}" for i, j in self.links)


def words(pieces: Sequence[str]) -> tuple[Word, ...]:
    """Merge readable pieces into words: a "##" piece continues the previous word; <bos>/<eos>/<pad> are skipped."""
    out: list[tuple[str, list[int]]] = []
    for i, piece in enumerate(pieces):
        if piece in NON_WORDS:
            continue
        if piece.startswith(CONTINUATION) and out and out[-1][1][-1] == i - 1:
            out[-1] = (out[-1][0] + piece[len(CONTINUATION):], out[-1][1] + [i])
        else:
            out.append((piece, [i]))
    return tuple(Word(text, tuple(idx)) for text, idx in out)


def cross_map(record: AttentionRecord, layer: int, heads: Sequence[int] | None = None) -> np.ndarray:
    """[T, S] cross-attention of one decoder layer, averaged over `heads` (None: every head)."""
    chosen = list(range(record.n_heads)) if heads is None else list(heads)
    if not chosen:
        raise ValueError("pick at least one head to align with")
    return np.stack([record.pattern("cross", layer, h) for h in chosen]).mean(0)


def align(matrix: np.ndarray, source_tokens: Sequence[str], output_tokens: Sequence[str]) -> WordAlignment:
    """Argmax word alignment from a [output token, source token] map."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.shape != (len(output_tokens), len(source_tokens)):
        raise ValueError(f"the map has shape {list(matrix.shape)} but there are {len(output_tokens)} output "
                         f"and {len(source_tokens)} source tokens")
    src, tgt = words(source_tokens), words(output_tokens)
    special = [i for i, t in enumerate(source_tokens) if t in NON_WORDS]
    scores = np.zeros((len(tgt), len(src)))
    links = []
    for j, tw in enumerate(tgt):
        rows = matrix[list(tw.pieces)].mean(0)  # (S,)
        scores[j] = [rows[list(sw.pieces)].sum() for sw in src]
        if src and scores[j].max() > rows[special].sum(initial=0.0):
            links.append((int(scores[j].argmax()), j))
    return WordAlignment(src, tgt, scores, tuple(sorted(links)))
