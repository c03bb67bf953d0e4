"""Offsets as linear maps (section 3.5): "for any fixed offset k, PE(pos+k) can be represented as a
linear function of PE(pos)".

For sinusoids the map is known in closed form: each (sin, cos) pair of frequency ω turns by the
angle ω·k, a 2×2 rotation. `rotation_check` applies those rotations to the model's own table and
measures how far the result is from the table shifted by k. For learned encodings there is no
formula, so `fit_offset_map` fits the best orthogonal map (rotation or reflection) by least
squares (orthogonal Procrustes) and reports the error. It is orthogonal, not any linear map,
because with no more positions than dimensions an unconstrained least-squares fit matches any
table exactly and would prove nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

Layout = Literal["interleaved", "halves", "fairseq"]  # where a table keeps its sines and cosines (config.sinusoid)


@dataclass(frozen=True)
class RotationCheck:
    """PE(t+k) predicted from PE(t) by one 2×2 rotation per frequency pair, against the real table."""

    offset: int
    frequencies: np.ndarray  # (D/2,) ω_i = 10000^(-2i/D)
    rotations: np.ndarray  # (D/2, 2, 2) acting on (PE(t, 2i), PE(t, 2i+1))
    before: np.ndarray  # (N-k, D) PE(t)
    predicted: np.ndarray  # (N-k, D) rotations applied to PE(t)
    actual: np.ndarray  # (N-k, D) PE(t+k) from the table
    pair_errors: np.ndarray  # (D/2,) largest |predicted - actual| in each pair
    layout: Layout = "interleaved"  # the model's own order; before/predicted/actual are in (sin, cos) pairs

    @property
    def max_error(self) -> float:
        return float(self.pair_errors.max())

    def dimensions(self, pair: int) -> tuple[int, int]:
        """The model's own dimensions of frequency pair `pair`: (2i, 2i+1), or (i, i + D/2) in [sin | cos] halves."""
        return (2 * pair, 2 * pair + 1) if self.layout == "interleaved" else (pair, pair + self.frequencies.size)


@dataclass(frozen=True)
class OffsetFit:
    """Best orthogonal map M with PE(t+k) ≈ PE(t)·M over the given positions, and how far it misses."""

    offset: int
    matrix: np.ndarray  # (D, D)
    predicted: np.ndarray  # (N-k, D)
    actual: np.ndarray  # (N-k, D)

    @property
    def relative_error(self) -> float:
        """‖predicted − actual‖ / ‖actual‖ (Frobenius): 0 when the offset is exactly a rotation."""
        return float(np.linalg.norm(self.predicted - self.actual) / np.linalg.norm(self.actual))

    @property
    def max_error(self) -> float:
        return float(np.abs(self.predicted - self.actual).max())


def _check(table: np.ndarray, offset: int) -> np.ndarray:
    table = np.asarray(table, dtype=np.float64)
    if table.ndim != 2 or table.shape[1] % 2:
        raise ValueError(f"positional table must be (positions, even d_model), got shape {list(table.shape)}")
    if not 1 <= offset < table.shape[0]:
        raise ValueError(f"offset must be between 1 and {table.shape[0] - 1} for {table.shape[0]} positions, got {offset}")
    return table


def paired(table: np.ndarray, layout: Layout) -> np.ndarray:
    """The table with its dimensions in the paper's order, (sin, cos) of each frequency side by side:
    [sin | cos] halves (Marian, OpenNMT-py, fairseq) interleaved, an interleaved table as it is."""
    if layout == "interleaved":
        return table
    half = table.shape[1] // 2
    out = np.empty_like(table)
    out[:, 0::2], out[:, 1::2] = table[:, :half], table[:, half:2 * half]  # (N, D)
    return out


def frequencies(d_model: int, layout: Layout) -> np.ndarray:
    """ω_i of each (sin, cos) pair: the paper's 10000^(-2i/D), or fairseq's 10000^(-i/(D/2-1))."""
    if layout == "fairseq":
        return np.exp(np.arange(d_model // 2) * -(math.log(10000.0) / (d_model // 2 - 1)))  # (D/2,)
    return np.exp(np.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))  # (D/2,)


def rotation_check(table: np.ndarray, offset: int, layout: Layout = "interleaved") -> RotationCheck:
    """Rotate every (sin, cos) pair of PE(t) by ω_i·k and compare with PE(t+k), for t = 0..N-1-k; `layout`
    says where the model keeps each pair's sine and cosine, and which frequencies it uses."""
    table = paired(_check(table, offset), layout)
    d = table.shape[1]
    freq = frequencies(d, layout)
    c, s = np.cos(freq * offset), np.sin(freq * offset)
    # sin(a+b) = sin a cos b + cos a sin b;  cos(a+b) = cos a cos b - sin a sin b
    rotations = np.stack([np.stack([c, s], -1), np.stack([-s, c], -1)], -2)  # (D/2, 2, 2)
    pairs = table[:-offset].reshape(-1, d // 2, 2)  # (N-k, D/2, 2)
    predicted = np.einsum("pij,npj->npi", rotations, pairs).reshape(-1, d)
    actual = table[offset:]
    pair_errors = np.abs(predicted - actual).reshape(-1, d // 2, 2).max(axis=(0, 2))
    return RotationCheck(offset, freq, rotations, table[:-offset], predicted, actual, pair_errors, layout)


def fit_offset_map(table: np.ndarray, offset: int) -> OffsetFit:
    """Least-squares orthogonal map from PE(t) to PE(t+k) (orthogonal Procrustes: M = U·Vᵀ of Xᵀ·Y = U·S·Vᵀ)."""
    table = _check(table, offset)
    x, y = table[:-offset], table[offset:]
    u, _, vt = np.linalg.svd(x.T @ y)
    matrix = u @ vt
    return OffsetFit(offset, matrix, x @ matrix, y)


def offset_errors(table: np.ndarray, offsets: list[int]) -> np.ndarray:
    """Relative error of the best orthogonal map for each offset."""
    return np.array([fit_offset_map(table, k).relative_error for k in offsets])
