"""Dataset scale: attention records, head statistics, attribution agreement and the source/prefix
split by target position over many sentences.

Records come from batches: sources of similar length are decoded together (greedy, KV cache,
no capture), then the batch is teacher-forced once on its own outputs with every head
recorded, and each sentence's block is cut out of the padded arrays. Padding never leaks in:
padded keys get exactly zero weight and padded rows are cut away.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from attnscope.engine.analysis.heads import STAT_COLUMNS, head_stats
from attnscope.engine.attribution import exact_pass
from attnscope.engine.attribution.agreement import layer_agreement
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.registry import splitting
from attnscope.engine.attribution.sentence import SentenceAttribution, attribute
from attnscope.engine.decoding.decode import greedy_batch
from attnscope.engine.decoding.translator import InputError, Translator, budget_batches
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.model.batch import pad
from attnscope.model.transformer import Transformer
from attnscope.records.attention import AttentionRecord

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd

Progress = Callable[[int, int], None]


def sources_of(translator: Translator, sentences: Sequence[str]) -> dict[int, list[int]]:
    """Source ids of every sentence that can be translated (blank ones are left out)."""
    out = {}
    for i, text in enumerate(sentences):
        try:
            out[i] = translator.source(text)[0]
        except InputError:
            continue
    return out


def greedy_targets(translator: Translator, sources: list[list[int]], max_len: int) -> list[list[int]]:
    """Greedy outputs of one batch of sources, each with its <eos> when it stopped within `max_len`."""
    src = pad(sources, translator.model.config.pad_id).to(translator.device)
    eos = translator.model.config.eos_id
    return [ids + [eos] if len(ids) < max_len else ids
            for ids in greedy_batch(translator.model, src, max_len, rules=translator.decoding_rules())]


def _records(translator: Translator, sources: list[list[int]], max_len: int) -> list[AttentionRecord]:
    """Greedy-decode one batch, then record every head in one teacher-forced pass over its outputs."""
    model = translator.model
    targets = greedy_targets(translator, sources, max_len)
    src, tgt_in = forced_inputs(translator, sources, targets)
    with torch.no_grad():
        source = model.encode(src, output_attentions=True)
        target = model.decode(tgt_in, source, output_attentions=True)
    return cut_records(translator, sources, targets, {"encoder": source.attentions, "decoder": target.self_attentions,
                                                      "cross": target.cross_attentions})


def forced_inputs(translator: Translator, sources: list[list[int]],
                  targets: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """The padded sources and decoder inputs (<bos> y1 .. y_{T-1}) of one batch, on the model's device."""
    bos, pad_id = translator.model.config.bos_id, translator.model.config.pad_id
    return (pad(sources, pad_id).to(translator.device),
            pad([decoder_inputs(t, bos) for t in targets], pad_id).to(translator.device))


def cut_records(translator: Translator, sources: list[list[int]], targets: list[list[int]],
                weights: dict[str, Sequence[torch.Tensor]]) -> list[AttentionRecord]:
    """Each sentence's record cut out of one padded batch's weights (per kind, one (B, H, Q, K) tensor a layer)."""
    stacked = {kind: torch.stack(list(w), dim=1).float().cpu().numpy()  # (B, L, H, Q, K)
               for kind, w in weights.items()}
    src_codec, tgt_codec, bos = translator.bundle.src_codec, translator.bundle.tgt_codec, translator.model.config.bos_id
    out = []
    for b, (s_ids, t_ids) in enumerate(zip(sources, targets)):
        s, t = len(s_ids), len(t_ids)
        out.append(AttentionRecord(tuple(src_codec.pieces(s_ids)), tuple(tgt_codec.pieces(decoder_inputs(t_ids, bos))),
                                   stacked["encoder"][b, :, :, :s, :s], stacked["decoder"][b, :, :, :t, :t],
                                   stacked["cross"][b, :, :, :t, :s]))
    return out


def batched_records(translator: Translator, sentences: Sequence[str], batch_size: int = 64,
                    progress: Progress | None = None) -> Iterator[tuple[int, AttentionRecord]]:
    """(sentence index, record) for every translatable sentence, decoded in length-sorted batches."""
    sources = sources_of(translator, sentences)
    done = 0
    for idx, budget in budget_batches(translator.model, sources, batch_size, rules=translator.decoding_rules()):
        with translator.inference():  # per batch: the lock is never held while the caller has the records
            records = _records(translator, [sources[i] for i in idx], budget)
        yield from zip(idx, records)
        done += len(idx)
        if progress:
            progress(done, len(sources))


def head_stats_each(translator: Translator, sentences: Sequence[str],
                    batch_size: int = 64) -> Iterator[tuple[int, pd.DataFrame]]:
    """(sentence index, `head_stats` of its record) for every translatable sentence, from batched capture."""
    for i, record in batched_records(translator, sentences, batch_size):
        yield i, head_stats(record)


def head_stats_summary(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Head statistics averaged over the sentences whose `head_stats` are given."""
    import pandas as pd

    frames = list(frames)
    if not frames:
        raise ValueError("no sentences to analyse: every one was empty")
    return pd.concat(frames).groupby(["kind", "layer", "head"], as_index=False, sort=False)[list(STAT_COLUMNS)].mean()


def head_stats_batched(translator: Translator, sentences: Sequence[str], batch_size: int = 64,
                       progress: Progress | None = None) -> pd.DataFrame:
    """Head statistics averaged over sentences (the columns of analysis.head_stats), from batched capture."""
    return head_stats_summary(head_stats(record) for _, record in batched_records(translator, sentences, batch_size, progress))


def greedy_pairs(translator: Translator, sentences: Sequence[str], batch_size: int = 64,
                 progress: Progress | None = None) -> Iterator[tuple[int, list[int], list[int]]]:
    """(sentence index, source ids, greedy output ids) for every translatable sentence, decoded in
    length-sorted batches (the outputs `Translator.translate` gives, a tested parity)."""
    sources = sources_of(translator, sentences)
    done = 0
    for idx, budget in budget_batches(translator.model, sources, batch_size, rules=translator.decoding_rules()):
        with translator.inference():
            targets = greedy_targets(translator, [sources[i] for i in idx], budget)
        yield from ((i, sources[i], t) for i, t in zip(idx, targets))
        done += len(idx)
        if progress:
            progress(done, len(sources))


@dataclass(frozen=True)
class SharesByPosition:
    """How much generated tokens drew on the source, by target position, averaged over a sample."""

    sentences: int
    counts: np.ndarray  # [P] generated tokens at position t (sentences at least t + 1 tokens long)
    mean: dict[str, np.ndarray]  # measure -> [P] mean source share at each position
    std: dict[str, np.ndarray]  # measure -> [P] its standard deviation over those tokens

    def overall(self, measure: str) -> float:
        """The mean source share over every generated token of the sample."""
        return float((self.mean[measure] * self.counts).sum() / self.counts.sum())

    @classmethod
    def over(cls, rows: Sequence[dict[str, np.ndarray]]) -> SharesByPosition:
        """The average of per-sentence source shares (measure -> [T], as `source_shares` gives them)."""
        if not rows:
            raise ValueError("no sentences to analyse: every one was empty")
        measures = list(rows[0])
        longest = max(len(r[measures[0]]) for r in rows)
        padded = {m: np.array([np.pad(r[m], (0, longest - len(r[m])), constant_values=np.nan) for r in rows])
                  for m in measures}  # [N, P], NaN past each sentence's end
        counts = np.sum(~np.isnan(padded[measures[0]]), axis=0)
        return cls(len(rows), counts, {m: np.nanmean(p, axis=0) for m, p in padded.items()},
                   {m: np.nanstd(p, axis=0) for m, p in padded.items()})


def source_shares(model: Transformer, src: list[int], tgt: list[int]) -> dict[str, np.ndarray]:
    """[T] source share of each output token of one pair by every method that splits (ALTI+ and value zeroing), from
    one traced pass in float64, one layer at a time (`exact_pass.contributions`)."""
    methods = splitting()
    found = exact_pass.contributions(model, src, decoder_inputs(tgt, model.config.bos_id), [m.mixing for m in methods])
    return {m.name: c.source_share for m, c in zip(methods, found)}


def shares_each(translator: Translator, sentences: Sequence[str], batch_size: int = 64,
                progress: Progress | None = None) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """(sentence index, `source_shares` of its greedy translation) for every translatable sentence, one at a time."""
    for i, src, tgt in greedy_pairs(translator, sentences, batch_size, progress):
        yield i, source_shares(translator.model, src, tgt)


def shares_by_position(translator: Translator, sentences: Sequence[str], batch_size: int = 64,
                       progress: Progress | None = None) -> SharesByPosition:
    """Source share of each greedy output token by position, ALTI+ and value zeroing, over `sentences`."""
    return SharesByPosition.over([shares for _, shares in shares_each(translator, sentences, batch_size, progress)])


def attributions_each(translator: Translator, sentences: Sequence[str],
                      ig: IGSettings | None = None) -> Iterator[tuple[int, SentenceAttribution]]:
    """(sentence index, every attribution of its greedy translation), one sentence at a time (value zeroing
    and gradients work per sentence); blank sentences and empty translations are left out."""
    for i, text in enumerate(sentences):
        try:
            result = translator.translate(text)
        except InputError:
            continue
        if result.steps:
            yield i, attribute(translator, result, ig)


def layer_comparison(translator: Translator, sentences: Sequence[str], ig: IGSettings | None = None) -> pd.DataFrame:
    """Layer × method agreement (see agreement.layer_agreement) over a sample of sentences."""
    return layer_agreement(att for _, att in attributions_each(translator, sentences, ig))
