"""The head atlas: every head's queries and keys over a sample of sentences, each head's in one joint 2-D map
(engine/analysis/projection.py), and the heads grouped by what their statistics measure (heads.head_stats).

Sentences are decoded in batches (greedy, as `Translator.translate`), then each batch is teacher-forced once on its
own outputs with the tracer's internals on: the queries and keys every attention call received (projected, split
into heads) and the weights it made. Padding never leaks in: each sentence's rows and keys are cut out of the
padded batch. `vectors_each` yields sentence by sentence (the page keeps them, so Stop keeps the finished ones);
`atlas` projects them, one head at a time, so only one head's points are ever joined.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from attnscope.engine.analysis.atlas_types import SIDES, Atlas, groups
from attnscope.engine.analysis.dataset import cut_records, forced_inputs, greedy_targets, head_stats_summary, sources_of
from attnscope.engine.analysis.heads import head_stats
from attnscope.engine.analysis.projection import Projection, project
from attnscope.engine.decoding.translator import Translator, budget_batches
from attnscope.engine.recording.trace import Keep
from attnscope.engine.recording.tracer import tracing
from attnscope.model import hooks
from attnscope.model.transformer import Transformer
from attnscope.records.attention import KINDS, Kind

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_SENTENCES, MAX_SENTENCES = 200, 1000
BATCH = 32  # sentences decoded and traced together: a batch of opus-mt's shape keeps well under 1 GB


@dataclass(frozen=True)
class SentenceVectors:
    """One sentence's queries and keys of every head, with its tokens and its heads' statistics."""

    source: tuple[str, ...]  # source tokens
    target: tuple[str, ...]  # the decoder's inputs (<bos> y1 .. y_{T-1})
    queries: dict[Kind, np.ndarray]  # kind -> (L, H, Q, dh) float32
    keys: dict[Kind, np.ndarray]  # kind -> (L, H, K, dh) float32
    stats: pd.DataFrame  # heads.head_stats of its record


def traced_qk(model: Transformer, src: Tensor, tgt_in: Tensor) -> tuple[dict[Kind, list[tuple[Tensor, Tensor]]],
                                                                       dict[Kind, tuple[Tensor, ...]]]:
    """One teacher-forced pass of a padded batch: the (queries, keys) each attention call received, each
    (B, H, N, dh), by kind in layer order, and its weights (B, H, Q, K). The one place the atlas reaches q and k."""
    with torch.no_grad(), tracing(model, Keep(weights=False, internals=True)) as calls:
        source = model.encode(src, output_attentions=True)
        target = model.decode(tgt_in, source, output_attentions=True)
    names = model.attention_by_kind()
    qk = {kind: [(calls.of(name, hooks.Q)[0], calls.of(name, hooks.K)[0]) for name in names[kind]] for kind in KINDS}
    return qk, {"encoder": source.attentions, "decoder": target.self_attentions, "cross": target.cross_attentions}


def _batch(translator: Translator, sources: list[list[int]], budget: int) -> list[SentenceVectors]:
    targets = greedy_targets(translator, sources, budget)
    src, tgt_in = forced_inputs(translator, sources, targets)
    qk, weights = traced_qk(translator.model, src, tgt_in)
    stacked = {kind: [torch.stack([p[i] for p in pairs], 1).float().cpu().numpy() for i in (0, 1)]  # (B, L, H, N, dh)
               for kind, pairs in qk.items()}
    out = []
    for b, record in enumerate(cut_records(translator, sources, targets, weights)):
        n = {"source": len(record.source_tokens), "target": len(record.target_tokens)}
        q_side, k_side = zip(*(SIDES[k] for k in KINDS))
        out.append(SentenceVectors(record.source_tokens, record.target_tokens,
                                   {k: stacked[k][0][b, :, :, :n[s]].copy() for k, s in zip(KINDS, q_side)},
                                   {k: stacked[k][1][b, :, :, :n[s]].copy() for k, s in zip(KINDS, k_side)},
                                   head_stats(record)))
    return out


def vectors_each(translator: Translator, sentences: Sequence[str], batch_size: int = BATCH,
                 max_len: int | None = None) -> Iterator[tuple[int, SentenceVectors]]:
    """(index among `sentences`, its queries and keys) for every translatable sentence, in length-sorted batches;
    outputs of at most `max_len` tokens (None: the budget `Translator.translate` gives each source)."""
    sources = sources_of(translator, sentences)
    for idx, budget in budget_batches(translator.model, sources, batch_size, max_len, translator.decoding_rules()):
        with translator.inference():
            vectors = _batch(translator, [sources[i] for i in idx], budget)
        yield from zip(idx, vectors)


def _points(vectors: Sequence[SentenceVectors], side: str) -> list[tuple[int, int, str]]:
    return [(n, p, token) for n, v in enumerate(vectors) for p, token in enumerate(getattr(v, side))]


def head_map(vectors: Sequence[SentenceVectors], kind: Kind, layer: int, head: int) -> Projection:
    """One head's joint map over every sentence of `vectors`."""
    return project(np.concatenate([v.queries[kind][layer, head] for v in vectors]),
                   np.concatenate([v.keys[kind][layer, head] for v in vectors]))


def atlas(results: Sequence[tuple[int, SentenceVectors]]) -> Atlas:
    """The atlas of the sentences in `results` ((sample index, vectors), in sample order)."""
    if not results:
        raise ValueError("no sentences to map: every one was empty")
    vectors = [v for _, v in results]
    maps, explained = {}, {}
    for kind in KINDS:
        n_layers, n_heads = vectors[0].queries[kind].shape[:2]
        n_points = sum(len(getattr(v, s)) for v in vectors for s in SIDES[kind])
        maps[kind] = np.zeros((n_layers, n_heads, n_points, 2), np.float32)
        explained[kind] = np.zeros((n_layers, n_heads))
        for layer in range(n_layers):
            for head in range(n_heads):
                p = head_map(vectors, kind, layer, head)
                maps[kind][layer, head] = np.concatenate([p.queries, p.keys])
                explained[kind][layer, head] = p.explained
    return Atlas(tuple(i for i, _ in results), {side: _points(vectors, side) for side in ("source", "target")},
                 maps, explained, groups(head_stats_summary(v.stats for v in vectors)))
