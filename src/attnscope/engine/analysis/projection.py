"""One head's queries and keys in one 2-D map, as AttentionViz draws them (Yeh et al. 2023): numbers in, numbers out.

What a head computes from a query q and a key k is q·k (scaled, plus any position bias, then softmaxed over the
keys of that query). Two changes leave every weight as it is and make distance in the joint space say more:

- shift: every key moved by t = mean(q) − mean(k). Each score of one query gains q·t, the same for all its keys,
  and the softmax over those keys does not change. Queries and keys then share a centroid, so the two clouds
  overlap instead of sitting apart along the direction that only adds a constant.
- scale: queries multiplied by c and keys divided by c, c = √(mean|k'| / mean|q|): q·k is unchanged, and both
  clouds have the same mean norm, so |q − k|² = |q|² + |k|² − 2 q·k tracks −q·k rather than the norms.

Then one PCA of both clouds together (centred on their joint mean, float64): the two axes along which queries and
keys vary most, the same axes for both, so a query lies near the keys it scores highest when the norms are alike.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NORMALISATION = ("Keys shifted by mean(q) − mean(k) and queries × c, keys ÷ c with c = √(mean|k| / mean|q|) "
                 "(AttentionViz): every q·k keeps its softmax weight, and the two clouds share a centre and a scale; "
                 "then one PCA of queries and keys together.")


@dataclass(frozen=True)
class Projection:
    """One head's joint map: 2-D coordinates of its queries and keys, and how they were made."""

    queries: np.ndarray  # (Nq, 2) float32
    keys: np.ndarray  # (Nk, 2) float32
    shift: np.ndarray  # (dh,) added to every key before scaling
    scale: float  # c: queries × c, keys ÷ c
    axes: np.ndarray  # (2, dh) the principal axes, in the normalised space
    explained: float  # share of the joint variance the two axes hold (0..1)


def normalise(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Queries and keys moved and scaled so that each query's weights are unchanged (see the module's docstring):
    (queries × c, (keys + shift) ÷ c, shift, c), in float64."""
    q, k = np.asarray(queries, np.float64), np.asarray(keys, np.float64)
    shift = q.mean(0) - k.mean(0)
    moved = k + shift
    q_norm, k_norm = np.linalg.norm(q, axis=1).mean(), np.linalg.norm(moved, axis=1).mean()
    scale = float(np.sqrt(k_norm / q_norm)) if q_norm > 0 and k_norm > 0 else 1.0
    return q * scale, moved / scale, shift, scale


def _signed(axes: np.ndarray) -> np.ndarray:
    """Each axis with its largest component positive: the same head gives the same map, not a mirrored one."""
    picks = np.argmax(np.abs(axes), axis=1)
    return axes * np.where(axes[np.arange(len(axes)), picks] < 0, -1.0, 1.0)[:, None]


def project(queries: np.ndarray, keys: np.ndarray) -> Projection:
    """One head's queries (Nq, dh) and keys (Nk, dh), normalised and projected by one joint PCA onto two axes."""
    if len(queries) == 0 or len(keys) == 0:
        raise ValueError("a head's map needs at least one query and one key")
    q, k, shift, scale = normalise(queries, keys)
    both = np.concatenate([q, k])
    centred = both - both.mean(0)
    values, vectors = np.linalg.eigh(centred.T @ centred)  # ascending; dh × dh, cheap beside the points
    order = np.argsort(values)[::-1][:2]
    axes = np.zeros((2, both.shape[1]))
    axes[:len(order)] = vectors[:, order].T
    axes = _signed(axes)
    total = float(values.clip(min=0).sum())
    explained = float(values[order].clip(min=0).sum() / total) if total > 0 else 1.0
    coords = (centred @ axes.T).astype(np.float32)
    return Projection(coords[:len(q)], coords[len(q):], shift, scale, axes, explained)
