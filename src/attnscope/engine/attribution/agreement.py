"""How far attributions agree, per generated token: Spearman rank correlation and top-1 agreement
over source tokens; and, over many sentences, which decoder layer's cross-attention agrees best."""
from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from attnscope.engine.attribution.registry import methods, references
from attnscope.engine.attribution.sentence import ATTENTION, SentenceAttribution
from attnscope.records.attention import AttentionRecord

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n along the last axis, tied values sharing their average rank (as scipy.stats.rankdata); a row
    holding NaN is all NaN. In numpy: importing scipy.stats would add ~60 MB to the app server for this alone."""
    order = np.argsort(x, axis=-1, kind="stable")
    ordered = np.take_along_axis(x, order, -1)
    position = np.arange(x.shape[-1])
    starts = np.ones(x.shape, dtype=bool)  # where a run of equal values begins, in sorted order
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    ends = np.ones(x.shape, dtype=bool)
    ends[..., :-1] = starts[..., 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)  # each value's run: first and last place
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, position, x.shape[-1]), -1), axis=-1), -1)
    ranks = np.empty(x.shape, dtype=np.float64)
    np.put_along_axis(ranks, order, (first + last) / 2 + 1, -1)
    return np.where(np.isnan(x).any(-1, keepdims=True), np.nan, ranks)


def spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman's rho between matching rows of two [T, S] maps (ties get average ranks); NaN for a constant row."""
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(-1, keepdims=True), rb - rb.mean(-1, keepdims=True)
    denom = np.sqrt((ra ** 2).sum(-1) * (rb ** 2).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (ra * rb).sum(-1) / np.where(denom > 0, denom, 1), np.nan)


def top1_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1.0 where both maps rank the same source token first, per row."""
    return (a.argmax(-1) == b.argmax(-1)).astype(np.float64)


def token_agreement(maps: Mapping[str, np.ndarray], tokens: Sequence[str]) -> pd.DataFrame:
    """One row per (generated token, pair of methods): spearman and top1 (1 = same top source token)."""
    import pandas as pd

    rows = []
    for a, b in combinations(maps, 2):
        rho, top = spearman_rows(maps[a], maps[b]), top1_rows(maps[a], maps[b])
        rows += [{"step": t, "token": tokens[t], "a": a, "b": b, "spearman": rho[t], "top1": top[t]}
                 for t in range(len(tokens))]
    return pd.DataFrame(rows)


def agreement_matrix(frame: pd.DataFrame, value: str = "spearman") -> pd.DataFrame:
    """Method × method mean of `value` over tokens (symmetric, 1 on the diagonal)."""
    import pandas as pd

    methods = list(dict.fromkeys([*frame["a"], *frame["b"]]))
    means = frame.groupby(["a", "b"])[value].mean()
    out = pd.DataFrame(np.eye(len(methods)), index=methods, columns=methods)
    for (a, b), v in means.items():
        out.loc[a, b] = out.loc[b, a] = v
    return out


def agreement_rows(att: SentenceAttribution) -> pd.DataFrame:
    """One sentence's agreement, one row per (decoder layer, measure, reference, generated token): Spearman
    and top-1 between the measure (a method that is no reference: raw attention, norm-based) and the reference
    attribution."""
    import pandas as pd

    rows, refs = [], references()
    measures = [m.name for m in methods() if not m.reference]
    for layer in range(att.weights.n_layers("cross")):
        maps = att.source_maps(layer)
        for measure in (m for m in measures if m in maps):
            for ref in (r for r in refs if r in maps):
                rho, top = spearman_rows(maps[measure], maps[ref]), top1_rows(maps[measure], maps[ref])
                rows += [{"layer": layer, "measure": measure, "reference": ref, "spearman": r, "top1": k}
                         for r, k in zip(rho, top)]
    return pd.DataFrame(rows, columns=["layer", "measure", "reference", "spearman", "top1"])


def summarize_agreement(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Per decoder layer, measure and reference: mean Spearman and top-1 agreement over every generated token
    of the sentences whose `agreement_rows` are given."""
    import pandas as pd

    frame = pd.concat(list(frames) or [pd.DataFrame()])
    if frame.empty:
        raise ValueError("no sentences to compare")
    return frame.groupby(["layer", "measure", "reference"], as_index=False).agg(
        spearman=("spearman", "mean"), top1=("top1", "mean"), tokens=("top1", "size"))


def layer_agreement(attributions: Iterable[SentenceAttribution]) -> pd.DataFrame:
    """Per decoder layer, measure (raw attention or norm-based) and reference attribution: mean
    Spearman and top-1 agreement over every generated token of every sentence."""
    return summarize_agreement(agreement_rows(att) for att in attributions)


def attention_best_layer(weights: AttentionRecord, reference: np.ndarray) -> int:
    """The decoder layer whose raw cross-attention (mean of heads) agrees best with a [T, S] reference, by mean
    Spearman over tokens: best_layer(layer_agreement([att]), ref) from the attention and that one map alone."""
    rho = [np.nanmean(spearman_rows(weights.mean_over_heads("cross", layer).astype(np.float64), reference))
           for layer in range(weights.n_layers("cross"))]
    return int(np.nanargmax(rho))


def best_layer(summary: pd.DataFrame, reference: str, measure: str = ATTENTION) -> int:
    """The decoder layer whose `measure` agrees best (mean Spearman) with `reference`."""
    rows = summary[(summary["measure"] == measure) & (summary["reference"] == reference)]
    if rows.empty:
        raise ValueError(f"no agreement rows for {measure} against {reference}")
    return int(rows.loc[rows["spearman"].idxmax(), "layer"])
