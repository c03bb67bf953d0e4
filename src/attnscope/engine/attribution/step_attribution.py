"""What each generated token relied on, laid out for one decoding step at a time: the source vs
target-prefix split (ALTI+), every method's scores over the source tokens, and how far each
method agrees with value zeroing on that token. Built once per sentence; a step only slices it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnscope.engine.attribution.agreement import spearman_rows, top1_rows
from attnscope.engine.attribution.sentence import VALUE_ZEROING, SentenceAttribution


@dataclass(frozen=True)
class StepAttributions:
    """Per generated token t (rows): its split, each method's source scores and agreement with the reference."""

    source_tokens: tuple[str, ...]
    prefix_tokens: tuple[str, ...]  # decoder inputs <bos> y1 ..: the prefix step t could read (columns 0..t)
    output_tokens: tuple[str, ...]  # what each step produced
    layer: int  # decoder layer of the attention and norm-based rows
    split_method: str  # the measure of the split (ALTI+)
    source_share: np.ndarray  # [T] share drawn from the source; the rest came from the prefix
    prefix: np.ndarray  # [T, T] share of each prefix token (zero after t)
    maps: dict[str, np.ndarray]  # method -> [T, S] nonnegative scores over the source tokens
    spearman: dict[str, np.ndarray]  # method -> [T] rank correlation with the reference over the source tokens
    top1: dict[str, np.ndarray]  # method -> [T] 1.0 where the method's top source token is the reference's
    reference: str = VALUE_ZEROING

    def top(self, scores: np.ndarray, t: int, k: int) -> list[tuple[int, float]]:
        """(position, score) of the k largest scores of row t, largest first; ties keep the earlier position."""
        row = scores[t]
        return [(int(j), float(row[j])) for j in np.argsort(-row, kind="stable")[:k]]


def step_attributions(att: SentenceAttribution, layer: int, reference: str = VALUE_ZEROING) -> StepAttributions:
    """Every method's source scores (attention and norms from decoder layer `layer`) with their per-token
    agreement (Spearman, top-1) against `reference`, plus the source/prefix split of every token (ALTI+)."""
    maps = att.source_maps(layer)
    if reference not in maps:
        raise ValueError(f"no {reference!r} scores for this sentence; it has {', '.join(maps)}")
    others = [m for m in maps if m != reference]
    split = att.split
    return StepAttributions(att.source_tokens, att.weights.target_tokens, att.output_tokens, layer, split.method,
                            split.source_share, split.prefix, maps, {m: spearman_rows(maps[m], maps[reference]) for m in others},
                            {m: top1_rows(maps[m], maps[reference]) for m in others}, reference)
