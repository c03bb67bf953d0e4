"""Norm-based attention equals ||a_ij (x_j W_V + b_V) W_O^h|| computed directly from the module's weights."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscope.engine.attribution.norms import layer_norms, norm_arrays, weighted_value_norms
from attnscope.engine.recording.capture import record_attention
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.engine.recording.tracer import trace
from attnscope.model.attention import MultiHeadAttention
from tests.attribution_fixtures import T5_MODEL, pair, run, tiny
from tests.engine_fixtures import joined, no_hooks_left, tiny_translator


def direct_norms(module: MultiHeadAttention, weights: torch.Tensor, kv_input: torch.Tensor) -> torch.Tensor:
    """(H, Q, K) from the module's parameters: values, then each head's columns of W_O."""
    h = module.n_heads
    v = kv_input @ module.v_proj.weight.T + (0.0 if module.v_proj.bias is None else module.v_proj.bias)  # (K, H·dh)
    dh = v.shape[-1] // h
    out = torch.zeros_like(weights)
    for head in range(h):
        cols = slice(head * dh, (head + 1) * dh)
        f = v[:, cols] @ module.out_proj.weight[:, cols].T  # (K, D)
        out[head] = weights[head] * f.norm(dim=-1)
    return out


@pytest.mark.parametrize("norm", ["post", "pre", "t5"])
@pytest.mark.parametrize("seed", [0, 1])
def test_norms_match_a_direct_computation_from_the_weights(seed: int, norm: str) -> None:
    """Also on T5's variants: W_O has no bias to subtract, the heads are narrower, the weights carry the position bias."""
    model = tiny(seed, **(T5_MODEL if norm == "t5" else dict(norm=norm)))
    src, tgt = pair(seed)
    _, layers = run(model, src, tgt)
    with record_attention(model) as rec:
        model(torch.tensor([src]), torch.tensor([decoder_inputs(tgt, model.config.bos_id)]))
    weights = {name: w[0] for name, w in joined(rec).items()}
    traced = trace(model, src, decoder_inputs(tgt, model.config.bos_id))
    memory = model.encode(torch.tensor([src])).memory[0].detach()
    got = {kind: norm_arrays(traced, kind)[0] for kind in ("encoder", "decoder", "cross")}
    for i, layer in enumerate(model.encoder):
        x = layers[layer][0]
        h = layer.attn_block.norm(x) if model.config.norm == "pre" else x
        want = direct_norms(layer.self_attn, weights[f"encoder.{i}.self_attn"], h)
        np.testing.assert_allclose(got["encoder"][i], want.detach().numpy(), atol=1e-10)
    for i, layer in enumerate(model.decoder):
        x = layers[layer][0]
        h = layer.self_block.norm(x) if model.config.norm == "pre" else x
        want = direct_norms(layer.self_attn, weights[f"decoder.{i}.self_attn"], h)
        np.testing.assert_allclose(got["decoder"][i], want.detach().numpy(), atol=1e-10)
        want = direct_norms(layer.cross_attn, weights[f"decoder.{i}.cross_attn"], memory)
        np.testing.assert_allclose(got["cross"][i], want.detach().numpy(), atol=1e-10)


def test_layer_norm_is_the_norm_of_the_summed_head_vectors() -> None:
    model = tiny(2)
    src, tgt = pair(2)
    traced = trace(model, src, decoder_inputs(tgt, model.config.bos_id))
    call = traced.decoder[1].cross_attn
    v = call.internals.values[0]  # (H, K, dh)
    h, k, dh = v.shape
    summed = sum(call.weights[0, head, :, :, None] * (v[head] @ call.module.out_proj.weight[:, head * dh:(head + 1) * dh].T)
                 for head in range(h))  # (Q, K, D)
    np.testing.assert_allclose(layer_norms(traced, "cross")[1], summed.norm(dim=-1).detach().numpy(), rtol=1e-6)


def test_translator_norm_record_has_the_axes_of_the_weights() -> None:
    tr = tiny_translator(0, eos_bias=2.0)
    result = tr.translate("a b c d")
    norms = weighted_value_norms(tr, result)
    for kind in ("encoder", "decoder", "cross"):
        assert norms.array(kind).shape == result.attention.array(kind).shape
        assert norms.axes(kind) == result.attention.axes(kind)
        assert np.all(norms.array(kind) >= 0)
    # masked (future) decoder positions carry zero weight, hence zero norm
    upper = np.triu(np.ones(norms.decoder.shape[-2:], dtype=bool), k=1)
    assert np.all(norms.decoder[..., upper] == 0)


def test_trace_leaves_no_hooks_and_capture_unchanged() -> None:
    tr = tiny_translator(1, eos_bias=2.0)
    before = tr.translate("a b c")
    weighted_value_norms(tr, before)
    assert no_hooks_left(tr.model)
    after = tr.translate("a b c")
    assert after.target_ids == before.target_ids
    for kind in ("encoder", "decoder", "cross"):
        np.testing.assert_array_equal(after.attention.array(kind), before.attention.array(kind))


def test_a_gated_head_passes_on_nothing() -> None:
    from attnscope.engine.analysis.head_gate import gate_heads

    model = tiny(3)
    src, tgt = pair(3)
    with gate_heads(model, [("cross", 1, 2), ("encoder", 0, 0)]):
        traced = trace(model, src, decoder_inputs(tgt, model.config.bos_id))
        cross, encoder = norm_arrays(traced, "cross")[0], norm_arrays(traced, "encoder")[0]
    assert np.all(cross[1, 2] == 0) and np.all(encoder[0, 0] == 0)
    assert np.all(cross[1, [0, 1, 3]].sum(-1) > 0) and np.all(cross[0].sum(-1) > 0)
