"""Value zeroing against actually zeroing one token's value vectors in a second forward pass: on tiny
float64 models, and on the shipped models (float32, computed through a float64 copy)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import attnscope
from attnscope.checkpoints.registry import shipped_dir
from attnscope.engine.attribution.value_zeroing import MIXING, value_zeroing
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.engine.recording.tracer import trace
from tests.attribution_fixtures import T5_MODEL, pair, run, tiny
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


def real_zeroing(model, src: list[int], tgt: list[int]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per-layer shares by re-running `model` once per zeroed token: ([S, S] per encoder layer, [T, S + T] per decoder layer)."""
    s, t = len(src), len(tgt)
    _, base = run(model, src, tgt)
    encoder, decoder = [], []
    for layer in model.encoder:
        want = np.zeros((s, s))
        for j in range(s):
            _, edited = run(model, src, tgt, {layer.self_attn: zeroed(j)})
            want[:, j] = cosine_distance(base[layer][1], edited[layer][1])
        encoder.append(rows_normalised(want))
    for layer in model.decoder:
        want = np.zeros((t, s + t))
        for j in range(s):
            _, edited = run(model, src, tgt, {layer.cross_attn: zeroed(j)})
            want[:, j] = cosine_distance(base[layer][1], edited[layer][1])
        for j in range(t):
            _, edited = run(model, src, tgt, {layer.self_attn: zeroed(j)})
            want[:, s + j] = cosine_distance(base[layer][1], edited[layer][1])
        assert np.all(np.abs(np.triu(want[:, s:], k=1)) < 1e-12)  # later positions cannot matter
        decoder.append(rows_normalised(want))
    return encoder, decoder


@pytest.mark.parametrize("norm", ["post", "pre", "t5"])
def test_per_layer_scores_equal_rerunning_with_zeroed_values(norm: str) -> None:
    """Also on T5's variants: zeroing values leaves the position bias and the weights as they were, and the rest of
    the layer (RMS norm, gated feed-forward, no biases) runs through the model's own modules."""
    model = tiny(3, **(T5_MODEL if norm == "t5" else dict(norm=norm)))
    src, tgt = pair(3)
    got = MIXING.from_trace(trace(model, src, decoder_inputs(tgt, model.config.bos_id)))
    encoder, decoder = real_zeroing(model, src, tgt)
    np.testing.assert_allclose(got.encoder_layers, np.stack(encoder), atol=1e-9)
    np.testing.assert_allclose(got.decoder_layers, np.stack(decoder), atol=1e-9)


def test_rollout_composes_the_layers() -> None:
    model = tiny(4)
    src, tgt = pair(4)
    got = MIXING.from_trace(trace(model, src, decoder_inputs(tgt, model.config.bos_id)))
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


@pytest.mark.parametrize("checkpoint", ["multi30k-en-de", "multi30k-en-fr"])
def test_shipped_float32_models_match_real_zeroing_within_1e_6_and_are_never_negative(checkpoint: str) -> None:
    """The shipped models run in float32; their value zeroing is computed through a float64 copy. The
    reference zeroes each token's values inside the layer of a float64 copy made here and re-runs the model."""
    tr = attnscope.load(shipped_dir() / f"{checkpoint}.safetensors")
    result = tr.translate("Two dogs play in the snow.")
    assert next(tr.model.parameters()).dtype == torch.float32
    got = value_zeroing(tr, result)
    reference = copy.deepcopy(tr.model).double().eval()
    encoder, decoder = real_zeroing(reference, list(result.source_ids), list(result.target_ids))
    np.testing.assert_allclose(got.encoder_layers, np.stack(encoder), atol=1e-6, rtol=0)
    np.testing.assert_allclose(got.decoder_layers, np.stack(decoder), atol=1e-6, rtol=0)
    assert got.encoder_layers.min() >= 0 and got.decoder_layers.min() >= 0 and got.decoder_rollout.min() >= 0
