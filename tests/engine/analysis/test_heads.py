"""Head statistics, rollout and source alignment on patterns with known answers."""
from __future__ import annotations

import math

import numpy as np

from attnscope.engine.analysis.heads import head_stats, head_stats_delta, rollout, source_alignment
from tests.record_fixtures import SRC, pattern_record


def test_identity_heads_are_diagonal_and_certain() -> None:
    stats = head_stats(pattern_record("identity"))
    enc = stats[stats.kind == "encoder"]
    assert len(stats) == 3 * 2 * 3
    assert np.allclose(enc.diagonal, 1) and np.allclose(enc.entropy, 0) and np.allclose(enc.mean_distance, 0)
    assert stats[stats.kind == "cross"].diagonal.isna().all()


def test_previous_token_and_uniform_heads() -> None:
    prev = head_stats(pattern_record("previous"))
    assert np.allclose(prev[prev.kind == "encoder"].previous_token, 4 / 5)
    uniform = head_stats(pattern_record("uniform"))
    enc = uniform[uniform.kind == "encoder"]
    assert np.allclose(enc.entropy, math.log(len(SRC)))
    assert np.allclose(enc.eos_share, 1 / 5) and np.allclose(enc.punctuation_share, 1 / 5)


def test_rollout_and_alignment_rows_sum_to_one() -> None:
    r = pattern_record("uniform")
    rolled = rollout(r)
    assert rolled.shape == (2, 5, 5) and np.allclose(rolled.sum(-1), 1)
    assert np.allclose(rollout(pattern_record("identity"))[-1], np.eye(5))
    align = source_alignment(r)
    assert align.shape == (4, 5) and np.allclose(align.sum(-1), 1)
    assert np.allclose(source_alignment(pattern_record("identity")), r.mean_over_heads("cross", 0))


def test_delta_of_a_record_with_itself_is_zero() -> None:
    r = pattern_record("uniform")
    assert np.allclose(head_stats_delta(r, r).filter(like="_delta").fillna(0), 0)
