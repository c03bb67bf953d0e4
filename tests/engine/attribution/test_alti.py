"""ALTI+ against a slow, explicit computation written here from the papers' formulas (Ferrando et al.,
EMNLP 2022: ALTI and ALTI+), token by token, from the parameters and each layer's input alone."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnscope.engine.attribution import alti
from attnscope.engine.recording.trace import Trace, decoder_inputs
from attnscope.engine.recording.tracer import trace
from attnscope.model.positions import relative_bucket
from tests.attribution_fixtures import T5_PARTS, pair, run, tiny
from tests.engine_fixtures import no_hooks_left, tiny_translator


def centre(z: np.ndarray, kind: str) -> np.ndarray:
    """What the norm scales: z minus its mean, or z itself for RMS norm (T5's)."""
    return z if kind == "rms" else z - z.mean()


def layer_norm(module, z: np.ndarray, kind: str, eps: float) -> tuple[np.ndarray, float]:
    """LN(z) and its scale 1/sigma, written out for both LayerNorm variants and RMS norm (no mean, no beta)."""
    centred = centre(z, kind)
    sigma = (math.sqrt((centred ** 2).mean() + eps) if kind in ("torch", "rms") else
             math.sqrt((centred ** 2).sum() / (len(z) - 1)) + eps)
    gamma = module.weight.detach().numpy()
    beta = 0.0 if kind == "rms" else module.bias.detach().numpy()
    return gamma * centred / sigma + beta, 1.0 / sigma


def linear(module, x: np.ndarray) -> np.ndarray:
    return x @ module.weight.detach().numpy().T + (0.0 if module.bias is None else module.bias.detach().numpy())


def position_bias(model, kind: str, n_q: int, n_k: int) -> np.ndarray:
    """T5's bias (H, Q, K): the stack's table row of each offset's bucket; zeros without one (and in cross-attention)."""
    c = model.config
    if c.positional != "relative" or kind == "cross":
        return np.zeros((c.n_heads, n_q, n_k))
    table = (model.encoder if kind == "encoder" else model.decoder)[0].relative_bias.table.weight.detach().numpy()
    offsets = torch.arange(n_k)[None, :] - torch.arange(n_q)[:, None]
    buckets = relative_bucket(offsets, c.relative_buckets, c.relative_max_distance, kind == "encoder").numpy()
    return table[buckets].transpose(2, 0, 1)


def head_mixed(mha, queries_in: np.ndarray, keys_in: np.ndarray, causal: bool, bias: np.ndarray) -> np.ndarray:
    """g[i, j] = sum_h a^h_ij W_O^h v^h_j, one query, key and head at a time, (Q, K, D); the scores q·k/√dh (q·k
    where the model does not scale them) plus `bias` (H, Q, K)."""
    q, k, v = linear(mha.q_proj, queries_in), linear(mha.k_proj, keys_in), linear(mha.v_proj, keys_in)
    w_o = mha.out_proj.weight.detach().numpy()
    n_q, n_k, d = len(q), len(k), w_o.shape[0]
    heads = mha.n_heads
    dh = q.shape[1] // heads
    scale = 1 / math.sqrt(dh) if mha.scale_scores else 1.0
    g = np.zeros((n_q, n_k, d))
    for h in range(heads):
        cols = slice(h * dh, (h + 1) * dh)
        for i in range(n_q):
            scores = np.array([q[i, cols] @ k[j, cols] * scale + bias[h, i, j] if not (causal and j > i) else -np.inf
                               for j in range(n_k)])
            a = np.exp(scores - scores.max())
            a /= a.sum()
            for j in range(n_k):
                g[i, j] += a[j] * (w_o[:, cols] @ v[j, cols])
    return g


def closeness(y: np.ndarray, vectors: list[np.ndarray]) -> np.ndarray:
    """ALTI's row: max(0, ||y||_1 - ||y - T_j||_1), normalised."""
    c = np.array([max(0.0, np.abs(y).sum() - np.abs(y - t).sum()) for t in vectors])
    return c / c.sum()


def block(model, norm, mha, residual: np.ndarray, memory: np.ndarray | None, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """One attention block, explicitly: its ALTI rows (Q, K [+1]) and its output (Q, D)."""
    c = model.config
    pre = c.norm == "pre"
    normed = np.array([layer_norm(norm, r, c.layer_norm, c.norm_eps)[0] for r in residual]) if pre else residual
    keys_in = normed if memory is None else memory
    g = head_mixed(mha, normed, keys_in, causal, position_bias(model, mha.kind, len(normed), len(keys_in)))
    b_o = 0.0 if mha.out_proj.bias is None else mha.out_proj.bias.detach().numpy()
    rows, out = [], []
    for i in range(len(residual)):
        vectors = [g[i, j] + (residual[i] if memory is None and j == i else 0.0) for j in range(g.shape[1])]
        if memory is not None:
            vectors.append(residual[i])  # cross-attention: the decoder token's own state is one more input
        z = residual[i] + g[i].sum(0) + b_o
        if pre:
            y = z
        else:  # LayerNorm with the output's own scale, applied to each vector
            y, scale = layer_norm(norm, z, c.layer_norm, c.norm_eps)
            gamma = norm.weight.detach().numpy()
            vectors = [gamma * centre(t, c.layer_norm) * scale for t in vectors]
        rows.append(closeness(y, vectors))
        out.append(y)
    return np.array(rows), np.array(out)


def ffn(model, norm, layer_ffn, x: np.ndarray) -> np.ndarray:
    c = model.config

    def f(h: np.ndarray) -> np.ndarray:
        if c.ffn == "gated":  # T5 v1.1: GELU (tanh approximation) of the gate times the up projection
            gate = torch.nn.functional.gelu(torch.from_numpy(linear(layer_ffn.gate, h)), approximate="tanh").numpy()
            return linear(layer_ffn.down, gate * linear(layer_ffn.up, h))
        return linear(layer_ffn.down, np.maximum(linear(layer_ffn.up, h), 0.0))

    if c.norm == "pre":
        return np.array([xi + f(layer_norm(norm, xi, c.layer_norm, c.norm_eps)[0]) for xi in x])
    return np.array([layer_norm(norm, xi + f(xi), c.layer_norm, c.norm_eps)[0] for xi in x])


def explicit_alti(model, src: list[int], tgt: list[int]) -> dict:
    """Every block's rows and the rollout, by loops; only each layer's input comes from a plain hooked run."""
    _, layers = run(model, src, tgt)
    enc_rows, self_rows, cross_rows = [], [], []
    for layer in model.encoder:
        x = layers[layer][0].numpy()
        rows, h = block(model, layer.attn_block.norm, layer.self_attn, x, None, causal=False)
        np.testing.assert_allclose(ffn(model, layer.ffn_block.norm, layer.ffn, h), layers[layer][1].numpy(), atol=1e-10)
        enc_rows.append(rows)
    memory = layers[model.encoder[-1]][1].numpy()
    if model.config.has_final_norm:
        memory = np.array([layer_norm(model.encoder_norm, m, model.config.layer_norm, model.config.norm_eps)[0]
                           for m in memory])
    for layer in model.decoder:
        x = layers[layer][0].numpy()
        rows_self, h = block(model, layer.self_block.norm, layer.self_attn, x, None, causal=True)
        rows_cross, h2 = block(model, layer.cross_block.norm, layer.cross_attn, h, memory, causal=False)
        np.testing.assert_allclose(ffn(model, layer.ffn_block.norm, layer.ffn, h2), layers[layer][1].numpy(), atol=1e-10)
        self_rows.append(rows_self)
        cross_rows.append(rows_cross)
    return {"encoder": enc_rows, "self": self_rows, "cross": cross_rows,
            "rollout": explicit_rollout(enc_rows, self_rows, cross_rows)}


def explicit_rollout(enc_rows: list, self_rows: list, cross_rows: list) -> np.ndarray:
    """Each generated token as a mixture of [source | decoder inputs], one position and one block at a time."""
    s, t = len(enc_rows[0]), len(self_rows[0])
    source = [np.eye(s)[j] for j in range(s)]  # encoder positions over source tokens
    for rows in enc_rows:
        source = [sum(rows[i, j] * source[j] for j in range(s)) for i in range(s)]
    states = [np.concatenate([np.zeros(s), np.eye(t)[i]]) for i in range(t)]
    for rows_self, rows_cross in zip(self_rows, cross_rows):
        mixed = [sum(rows_self[i, k] * states[k] for k in range(t)) for i in range(t)]  # the self block, residual included
        states = [rows_cross[i, s] * mixed[i]  # the cross block's residual ...
                  + sum(rows_cross[i, j] * np.concatenate([source[j], np.zeros(t)]) for j in range(s))  # ... and the source
                  for i in range(t)]
    return np.array(states)


def blocks(traced: Trace) -> dict[str, np.ndarray]:
    """ALTI of every attention block of a traced pass: encoder [L, S, S], decoder self [L, T, T], cross
    [L, T, S + 1]."""
    with torch.no_grad():
        decoder = [alti.decoder_layer(lt) for lt in traced.decoder]
        return {"encoder": np.stack([alti.encoder_layer(lt).numpy() for lt in traced.encoder]),
                "self": np.stack([p.numpy() for p, _ in decoder]), "cross": np.stack([c.numpy() for _, c in decoder])}


@pytest.mark.parametrize("norm,kind,t5", [("pre", "torch", False), ("post", "torch", False), ("post", "annotated", False),
                                          ("pre", "annotated", False), ("pre", "rms", False), ("post", "rms", False),
                                          ("pre", "rms", True), ("post", "rms", True)])
def test_alti_plus_equals_the_explicit_computation(norm: str, kind: str, t5: bool) -> None:
    """Every norm; with `t5` also T5's relative position bias, unscaled scores, no biases, gated GELU, narrow heads."""
    model = tiny(11, norm=norm, layer_norm=kind, **(T5_PARTS if t5 else {}))
    src, tgt = pair(11)
    want = explicit_alti(model, src, tgt)
    traced = trace(model, src, decoder_inputs(tgt, model.config.bos_id))
    got = blocks(traced)
    np.testing.assert_allclose(got["encoder"], np.array(want["encoder"]), atol=1e-10)
    np.testing.assert_allclose(got["self"], np.array(want["self"]), atol=1e-10)
    np.testing.assert_allclose(got["cross"], np.array(want["cross"]), atol=1e-10)
    contributions = alti.MIXING.from_trace(traced)
    np.testing.assert_allclose(contributions.decoder_rollout, want["rollout"], atol=1e-10)
    assert contributions.method == "ALTI+"


def test_the_residual_keeps_a_share_of_its_own_token() -> None:
    """The issue's point: a token's own path through the residual stream counts (the diagonal and the cross
    block's last column), so the prefix keeps a real share instead of leaking to the source at every layer."""
    model = tiny(12, norm="pre")
    src, tgt = pair(12)
    al = blocks(trace(model, src, decoder_inputs(tgt, model.config.bos_id)))
    assert np.all(np.diagonal(al["encoder"], axis1=1, axis2=2) > 0)
    assert np.all(np.diagonal(al["self"], axis1=1, axis2=2) > 0) and np.all(al["cross"][:, :, -1] > 0)
    assert np.all(np.triu(al["self"], k=1) == 0)  # no token reads a later one


@pytest.mark.parametrize("seed", [0, 1])
def test_shares_of_a_translation_sum_to_one(seed: int) -> None:
    tr = tiny_translator(seed, eos_bias=2.0)
    result = tr.translate("a b c d e")
    c = alti.alti_plus(tr, result)
    t, s = len(result.target_ids), len(result.source_ids)
    assert c.source.shape == (t, s) and c.prefix.shape == (t, t)
    np.testing.assert_allclose(c.source.sum(-1) + c.prefix.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(c.encoder_layers.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(c.decoder_layers.sum(-1), 1.0, atol=1e-12)
    assert np.all(c.decoder_rollout >= 0) and np.all(np.triu(c.prefix, k=1) == 0)
    assert np.all((0 < c.source_share) & (c.source_share < 1))
    assert no_hooks_left(tr.model)
    assert next(tr.model.parameters()).dtype == torch.float32  # the shared model is untouched
