"""Value zeroing against actually zeroing one token's value vectors in a second forward pass."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscope.engine.internals import trace_pair
from attnscope.engine.value_zeroing import from_trace, value_zeroing
from tests.attribution_fixtures import pair, run, tiny
from tests.engine_fixtures import tiny_translator


def zeroed(j: int):
    def edit(values: torch.Tensor) -> torch.Tensor:
        values = values.clone()
        values[:, :, j] = 0.0  # token j's value vector in every head
        return values
    return edit


def cosine_distance(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    return (1 - torch.nn.functional.cosine_similarity(a, b, dim=-1)).numpy()


def rows_normalised(m: np.ndarray) -> np.ndarray:
    return m / m.sum(-1, keepdims=True)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_per_layer_scores_equal_rerunning_with_zeroed_values(norm: str) -> None:
    model = tiny(3, norm=norm)
    src, tgt = pair(3)
    s, t = len(src), len(tgt)
    _, base = run(model, src, tgt)
    got = from_trace(model, trace_pair(model, src, tgt))
    for i, layer in enumerate(model.encoder):
        want = np.zeros((s, s))
        for j in range(s):
            _, edited = run(model, src, tgt, {layer.self_attn: zeroed(j)})
            want[:, j] = cosine_distance(base[layer][1], edited[layer][1])
        np.testing.assert_allclose(got.encoder_layers[i], rows_normalised(want), atol=1e-9)
    for i, layer in enumerate(model.decoder):
        want = np.zeros((t, s + t))
        for j in range(s):
            _, edited = run(model, src, tgt, {layer.cross_attn: zeroed(j)})
            want[:, j] = cosine_distance(base[layer][1], edited[layer][1])
        for j in range(t):
            _, edited = run(model, src, tgt, {layer.self_attn: zeroed(j)})
            want[:, s + j] = cosine_distance(base[layer][1], edited[layer][1])
        assert np.all(np.abs(np.triu(want[:, s:], k=1)) < 1e-12)  # later positions cannot matter
        np.testing.assert_allclose(got.decoder_layers[i], rows_normalised(want), atol=1e-9)


def test_rollout_composes_the_layers() -> None:
    model = tiny(4)
    src, tgt = pair(4)
    got = from_trace(model, trace_pair(model, src, tgt))
    s, t = len(src), len(tgt)
    memory = got.encoder_layers[1] @ got.encoder_layers[0]
    r = np.hstack([np.zeros((t, s)), np.eye(t)])
    for m in got.decoder_layers:
        r = m[:, :s] @ np.hstack([memory, np.zeros((s, t))]) + m[:, s:] @ r
    np.testing.assert_allclose(got.decoder_rollout, r, atol=1e-12)
    np.testing.assert_allclose(got.encoder_rollout, memory, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_source_and_prefix_shares_sum_to_one(seed: int) -> None:
    tr = tiny_translator(seed, eos_bias=2.0)
    result = tr.translate("a b c d e")
    vz = value_zeroing(tr, result)
    t, s = len(result.target_ids), len(result.source_ids)
    assert vz.source.shape == (t, s) and vz.prefix.shape == (t, t)
    np.testing.assert_allclose(vz.source.sum(-1) + vz.prefix.sum(-1), 1.0, atol=1e-9)
    np.testing.assert_allclose(vz.encoder_layers.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vz.decoder_layers.sum(-1), 1.0, atol=1e-6)
    assert np.all(vz.decoder_rollout >= 0) and np.all(np.triu(vz.prefix, k=1) == 0)
    assert np.all((0 <= vz.source_share) & (vz.source_share <= 1 + 1e-9))
