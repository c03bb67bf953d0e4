"""Head statistics, attention rollout, source alignment and head ablation: numbers in, numbers out."""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from attnscope.engine.analysis.bleu import scores
from attnscope.engine.analysis.head_gate import HeadKey, gate_heads
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.records.attention import KINDS, AttentionRecord

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd

STAT_COLUMNS = ("entropy", "max_weight", "diagonal", "previous_token", "next_token", "bos_share", "eos_share",
                "punctuation_share", "mean_distance")
# One line per column of head_stats, shown as column help in the app.
STAT_DEFINITIONS = {
    "entropy": "Mean entropy (nats) of each query's weights: 0 = all on one key, higher = spread out.",
    "max_weight": "Mean of each query's largest weight: 1 = one key takes everything.",
    "diagonal": "Mean weight on the key at the query's own position (self-attention only).",
    "previous_token": "Mean weight on the key one position before the query (self-attention only).",
    "next_token": "Mean weight on the key one position after the query (self-attention only).",
    "bos_share": "Mean share of each query's weight on <bos> keys.",
    "eos_share": "Mean share of each query's weight on <eos> keys (a common resting place for idle heads).",
    "punctuation_share": "Mean share of each query's weight on punctuation keys.",
    "mean_distance": "Mean |key position − query position|, weighted by attention (self-attention only).",
}


def _row_entropy(w: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return -(np.where(w > 0, w * np.log(w), 0.0)).sum(-1)


def _offset_share(w: np.ndarray, offset: int) -> np.ndarray:
    """Mean weight each query puts on key index query+offset (0 where that key does not exist)."""
    q = np.arange(w.shape[-2])
    k = q + offset
    ok = (k >= 0) & (k < w.shape[-1])
    out = np.zeros(w.shape[:-1])
    out[..., ok] = w[..., q[ok], k[ok]]
    return out.mean(-1)


def _token_share(w: np.ndarray, keys: Sequence[str], pick: Callable[[str], bool]) -> np.ndarray:
    cols = [i for i, t in enumerate(keys) if pick(t)]
    return w[..., cols].sum(-1).mean(-1) if cols else np.zeros(w.shape[:-2])


def is_punctuation(token: str) -> bool:
    return bool(token) and all(ch in string.punctuation for ch in token)


def head_stats(record: AttentionRecord) -> pd.DataFrame:
    """One row per (kind, layer, head): how peaked, how positional, and where the sinks are.

    Positional scores (diagonal, previous/next token, mean distance) only make sense when
    queries and keys are the same sequence, so they are NaN for cross-attention.
    """
    import pandas as pd

    frames = []
    for kind in KINDS:
        w = record.array(kind).astype(np.float64)  # (L, H, Q, K)
        _, keys = record.axes(kind)
        cols: dict[str, np.ndarray] = {
            "entropy": _row_entropy(w).mean(-1), "max_weight": w.max(-1).mean(-1),
            "bos_share": _token_share(w, keys, lambda t: t == "<bos>"),
            "eos_share": _token_share(w, keys, lambda t: t == "<eos>"),
            "punctuation_share": _token_share(w, keys, is_punctuation)}
        if kind == "cross":
            nan = np.full(w.shape[:2], np.nan)
            cols.update(diagonal=nan, previous_token=nan, next_token=nan, mean_distance=nan)
        else:
            q, k = np.indices(w.shape[-2:])
            cols.update(diagonal=_offset_share(w, 0), previous_token=_offset_share(w, -1),
                        next_token=_offset_share(w, 1), mean_distance=(w * np.abs(k - q)).sum(-1).mean(-1))
        layer, head = np.indices(w.shape[:2]).reshape(2, -1)
        frames.append(pd.DataFrame({"kind": kind, "layer": layer, "head": head,
                                    **{c: cols[c].reshape(-1) for c in STAT_COLUMNS}}))
    return pd.concat(frames, ignore_index=True)


def head_stats_over(translator: Translator, sentences: Sequence[str],
                    progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Head statistics averaged over sentences translated one at a time: the plain reference that
    dataset.head_stats_batched is tested and benchmarked against (the app uses the batched one)."""
    import pandas as pd

    frames = []
    for i, text in enumerate(sentences):
        result = translator.translate(text)
        if result.attention is not None:
            frames.append(head_stats(result.attention))
        if progress:
            progress(i + 1, len(sentences))
    if not frames:
        raise ValueError("no sentences to analyse")
    return pd.concat(frames).groupby(["kind", "layer", "head"], as_index=False, sort=False)[list(STAT_COLUMNS)].mean()


def head_stats_delta(a: AttentionRecord, b: AttentionRecord) -> pd.DataFrame:
    """Per-head statistics of two records (e.g. two checkpoints on one sentence) and B − A."""
    left, right = head_stats(a), head_stats(b)
    keys = ["kind", "layer", "head"]
    merged = left.merge(right, on=keys, suffixes=("_a", "_b"))
    for column in STAT_COLUMNS:
        merged[f"{column}_delta"] = merged[f"{column}_b"] - merged[f"{column}_a"]
    return merged[keys + [f"{c}_{s}" for c in ("entropy", "max_weight", "diagonal", "eos_share")
                          for s in ("a", "b", "delta")]]


def _with_residual(a: np.ndarray) -> np.ndarray:
    """0.5 A + 0.5 I, rows renormalised (Abnar & Zuidema 2020): the residual path carries half."""
    mixed = 0.5 * a + 0.5 * np.eye(a.shape[-1])
    return mixed / mixed.sum(-1, keepdims=True)


def rollout(record: AttentionRecord) -> np.ndarray:
    """Encoder attention rollout: [L, S, S], entry l is how layer l's outputs draw on the input tokens."""
    out, acc = [], np.eye(len(record.source_tokens))
    for layer in range(record.n_layers("encoder")):
        acc = _with_residual(record.mean_over_heads("encoder", layer)) @ acc
        out.append(acc)
    return np.stack(out)


def source_alignment(record: AttentionRecord) -> np.ndarray:
    """[T, S] map of how much each decoder position's output draws on each source token.

    Cross-attention at decoder layer l brings source information into position j; later
    layers' self-attention (with the residual path, as in rollout) moves it to position t.
    The map averages over layers: (1/L) sum_l D'_L ... D'_{l+1} C_l, C_l the head-mean cross
    weights. Rows sum to 1.
    """
    n_layers, t = record.n_layers("cross"), len(record.target_tokens)
    total = np.zeros((t, len(record.source_tokens)))
    for layer in range(n_layers):
        contribution = record.mean_over_heads("cross", layer).astype(np.float64)
        for later in range(layer + 1, n_layers):
            contribution = _with_residual(record.mean_over_heads("decoder", later)) @ contribution
        total += contribution
    return total / n_layers


@dataclass(frozen=True)
class AblationResult:
    """A sentence translated with and without some heads."""

    baseline: Translation
    ablated: Translation
    token_changes: pd.DataFrame  # per baseline output token: prob before / after ablation, change


def ablate_sentence(translator: Translator, text: str, heads: Sequence[HeadKey]) -> AblationResult:
    """New translation with `heads` off, and how each baseline token's probability changed."""
    import pandas as pd

    baseline = translator.translate(text)
    with gate_heads(translator.model, heads):
        new = translator.translate(text)
        forced = translator.hypothesis(text, baseline.target_ids)  # baseline output scored by the ablated model
    before = [s.prob for s in baseline.steps or []]
    after = [s.prob for s in forced.steps or []]
    frame = pd.DataFrame({"step": range(len(before)), "token": [s.token for s in baseline.steps or []],
                          "prob_before": before, "prob_after": after})
    frame["change"] = frame["prob_after"] - frame["prob_before"]
    return AblationResult(baseline, new, frame)


def ablation_bleu(translator: Translator, pairs: Sequence[tuple[str, str]], heads: Sequence[HeadKey]) -> dict[str, float]:
    """Corpus BLEU on `pairs` with all heads and with `heads` switched off."""
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    before = scores(translator.translate_batch(sources), refs)["bleu"]
    with gate_heads(translator.model, heads):
        after = scores(translator.translate_batch(sources), refs)["bleu"]
    return {"bleu_before": before, "bleu_after": after, "bleu_change": round(after - before, 2), "sentences": len(pairs)}
