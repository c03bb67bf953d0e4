"""Head statistics, rollout and source alignment on patterns with known answers; ablation on a tiny model."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnscope.engine.analysis import ablated, head_stats, head_stats_delta, rollout, source_alignment
from attnscope.model.config import ModelConfig
from attnscope.model.transformer import Transformer
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


def test_ablation_is_scoped_and_really_switches_heads_off() -> None:
    torch.manual_seed(0)
    model = Transformer(ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=4, d_ff=32,
                                    n_encoder_layers=1, n_decoder_layers=2, dropout=0, attention_dropout=0)).eval()
    a, b = torch.randint(4, 20, (1, 6)), torch.randint(4, 20, (1, 6))
    tgt = torch.randint(4, 20, (1, 4))
    with torch.no_grad():
        base = model(a, tgt)
        with ablated(model, []):
            assert torch.equal(model(a, tgt), base)
        with ablated(model, [("cross", layer, h) for layer in range(2) for h in range(4)]):
            blind_a, blind_b = model(a, tgt), model(b, tgt)
    assert not torch.allclose(blind_a, base)
    assert torch.allclose(blind_a, blind_b, atol=1e-6)  # no cross-attention: the source cannot matter
    assert all(m.head_mask is None for m in model.attention_modules().values())
    with pytest.raises(ValueError, match="no encoder layer 5"):
        with ablated(model, [("encoder", 5, 0)]):
            pass
    assert all(m.head_mask is None for m in model.attention_modules().values())
