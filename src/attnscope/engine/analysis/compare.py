"""Differences of two attention maps, also when their tokens differ (e.g. "girl" vs "boy")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class MapDifference:
    """A − B over the positions both maps have (row i of A against row i of B, and so on)."""

    values: np.ndarray  # [rows, cols] A − B
    row_labels: tuple[str, ...]  # the token, or "a / b" where the two maps have different tokens there
    col_labels: tuple[str, ...]
    same_tokens: bool  # both maps have exactly the same tokens on both axes
    dropped_rows: int  # positions only one map has, left out of the difference
    dropped_cols: int

    @property
    def max_abs(self) -> float:
        return float(np.abs(self.values).max()) if self.values.size else 0.0


def _aligned(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
    return tuple(x if x == y else f"{x} / {y}" for x, y in zip(a, b))


def map_difference(a: np.ndarray, a_rows: Sequence[str], a_cols: Sequence[str],
                   b: np.ndarray, b_rows: Sequence[str], b_cols: Sequence[str]) -> MapDifference:
    """A − B position by position over the leading block both maps share.

    Two sentences that differ in a word ("A little girl ..." vs "A little boy ...") keep the
    same positions, so their maps can still be compared cell by cell; labels show both tokens."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != (len(a_rows), len(a_cols)) or b.shape != (len(b_rows), len(b_cols)):
        raise ValueError("each map must have one label per row and per column")
    n_rows, n_cols = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    same = tuple(a_rows) == tuple(b_rows) and tuple(a_cols) == tuple(b_cols)
    return MapDifference(a[:n_rows, :n_cols] - b[:n_rows, :n_cols], _aligned(a_rows, b_rows), _aligned(a_cols, b_cols),
                         same, max(a.shape[0], b.shape[0]) - n_rows, max(a.shape[1], b.shape[1]) - n_cols)
