"""One head's queries and keys in one 2-D map, as AttentionViz draws them (Yeh et al. 2023): numbers in, numbers out.

What a head computes from a query q and a key k is q·k (scaled, plus any position bias, then softmaxed over the
keys of that query). Two changes leave every weight as it is and make distance in the joint space say more:

- scale: queries multiplied by c and keys divided by c: every q·k is unchanged.
- shift: every key moved by one vector t. Each score of one query gains q·t, the same for all its keys, and the
  softmax over those keys does not change. (Queries cannot be moved: q·k would change by a different k·t per key.)

t makes the two clouds share a centre (t = c·mean(q) − mean(k)/c), and c gives them the same mean norm, so
|q − k|² = |q|² + |k|² − 2 q·k tracks −q·k rather than the norms. AttentionViz (Yeh et al. 2023) moves the keys
to the queries' centroid and scales both to one mean norm, one after the other; here c and t are solved together,
so both hold exactly (the mean key norm grows slower in c² than the mean query norm: one bisection finds c).

Then one PCA of both clouds together (centred on their shared centre, float64): the same two axes for queries and
keys, so a query lies near the keys it scores highest where the norms are alike.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NORMALISATION = ("Queries × c and keys ÷ c, then keys shifted so both clouds share a centre, c chosen so they "
                 "share a mean norm (as AttentionViz): every q·k keeps its softmax weight. Then one PCA of queries "
                 "and keys together.")


@dataclass(frozen=True)
class Projection:
    """One head's joint map: 2-D coordinates of its queries and keys, and how they were made."""

    queries: np.ndarray  # (Nq, 2) float32
    keys: np.ndarray  # (Nk, 2) float32
    shift: np.ndarray  # (dh,) added to every key after scaling
    scale: float  # c: queries × c, keys ÷ c
    axes: np.ndarray  # (2, dh) the principal axes, in the normalised space
    explained: float  # share of the joint variance the two axes hold (0..1)


def _scale(queries: np.ndarray, keys: np.ndarray) -> float:
    """c such that c·q and the keys k/c + t (t sharing the centres) have the same mean norm: with u = c², the root of
    u·mean|q| = mean|k − mean(k) + u·mean(q)|, increasing in u (mean|q| ≥ |mean(q)|); 1 where there is none."""
    centre, deviations = queries.mean(0), keys - keys.mean(0)
    a, b, c2 = (deviations ** 2).sum(1), deviations @ centre, float(centre @ centre)
    q_norm = float(np.linalg.norm(queries, axis=1).mean())

    def gap(u: float) -> float:
        return u * q_norm - float(np.sqrt(np.maximum(a + 2 * u * b + u * u * c2, 0.0)).mean())

    low, high = 0.0, 1.0
    while gap(high) < 0 and high < 1e12:
        low, high = high, high * 2
    if q_norm == 0 or gap(high) < 0 or gap(low) >= 0:
        return 1.0
    for _ in range(64):  # to float64's resolution of u, from any bracket the doubling found
        middle = (low + high) / 2
        low, high = (middle, high) if gap(middle) < 0 else (low, middle)
    return float(np.sqrt((low + high) / 2))


def normalise(queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Queries and keys scaled and the keys moved so that each query's weights are unchanged (see the module's
    docstring): (queries × c, keys ÷ c + shift, shift, c), in float64."""
    q, k = np.asarray(queries, np.float64), np.asarray(keys, np.float64)
    scale = _scale(q, k)
    shift = scale * q.mean(0) - k.mean(0) / scale
    return q * scale, k / scale + shift, shift, scale


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
