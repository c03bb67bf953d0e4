"""trace(): each captured intermediate is what the model computed, checked against the model's own
modules called directly (not the packed projections the forward pass uses), cached and not."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnscope.engine.recording.intermediates import trace
from attnscope.model.transformer import split_heads
from tests.engine.inside.inside_fixtures import Case
from tests.engine_fixtures import no_hooks_left

FIELDS = ("q", "k", "v", "scores", "weights", "concat", "output", "residual", "norm_input", "norm_output", "block_output")


def t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def attn_and_block(model, kind: str, layer: int):
    if kind == "encoder":
        return model.encoder[layer].self_attn, model.encoder[layer].attn_block
    if kind == "decoder":
        return model.decoder[layer].self_attn, model.decoder[layer].self_block
    return model.decoder[layer].cross_attn, model.decoder[layer].cross_block


def test_cached_and_uncached_traces_agree(case: Case) -> None:
    assert case.cached.sublayers.keys() == case.full.sublayers.keys()
    for key in case.full.sublayers:
        a, b = case.cached.sublayer(*key), case.full.sublayer(*key)
        for name in FIELDS:
            x, y = getattr(a, name), getattr(b, name)
            assert x.shape == y.shape, (key, name)
            assert np.array_equal(np.isfinite(x), np.isfinite(y)), (key, name)
            finite = np.isfinite(y)
            assert np.abs(x[finite] - y[finite]).max() <= 1e-5, (key, name)
    for name in ("decoder_layers", "logits", "memory"):
        assert np.abs(getattr(case.cached, name) - getattr(case.full, name)).max() <= 1e-5, name


@pytest.mark.parametrize("which", ["cached", "full"])
def test_weights_equal_the_recorder(case: Case, which: str) -> None:
    """The decoding run's recorder (cached greedy) and the trace capture the same softmax."""
    tr = getattr(case, which)
    L = len(case.model.decoder)
    enc = np.stack([tr.sublayer("encoder", i).weights for i in range(len(case.model.encoder))])
    dec = np.stack([tr.sublayer("decoder", i).weights for i in range(L)])
    cross = np.stack([tr.sublayer("cross", i).weights for i in range(L)])
    assert np.abs(enc - case.decoded.encoder.numpy()).max() <= 1e-6
    assert np.abs(dec - case.decoded.decoder.numpy()).max() <= 1e-6
    assert np.abs(cross - case.decoded.cross.numpy()).max() <= 1e-6


@pytest.mark.parametrize("which", ["cached", "full"])
def test_projections_scores_and_softmax(case: Case, which: str) -> None:
    """q, k, v are the q/k/v_proj modules applied to the block's attention input; the scores are
    q·k/√dh with -inf exactly on future keys; the weights are their softmax."""
    tr, model = getattr(case, which), case.model
    n_heads = model.config.n_heads
    for kind, layer in sorted(case.full.sublayers):
        s = tr.sublayer(kind, layer)
        attn, _ = attn_and_block(model, kind, layer)
        h = t(s.norm_output if model.config.norm == "pre" else s.residual)[None]  # (1, Q, D)
        kv_in = t(tr.memory)[None] if kind == "cross" else h
        with torch.no_grad():
            q = split_heads(attn.q_proj(h), n_heads)[0]
            k, v = split_heads(attn.k_proj(kv_in), n_heads)[0], split_heads(attn.v_proj(kv_in), n_heads)[0]
        for got, want in ((s.q, q), (s.k, k), (s.v, v)):
            assert np.abs(got - want.numpy()).max() <= 1e-5, (kind, layer)
        n_q, n_k = s.scores.shape[1:]
        future = np.triu(np.ones((n_q, n_k), bool), 1) if kind == "decoder" else np.zeros((n_q, n_k), bool)
        assert np.array_equal(np.isinf(s.scores), np.broadcast_to(future, s.scores.shape)), (kind, layer)
        manual = s.q @ s.k.transpose(0, 2, 1) / math.sqrt(s.q.shape[-1])
        assert np.abs(np.where(future, 0, manual - s.scores)).max() <= 1e-5
        assert np.abs(t(s.scores).softmax(-1).numpy() - s.weights).max() <= 1e-6


@pytest.mark.parametrize("which", ["cached", "full"])
def test_heads_concat_w_o_and_residual_block(case: Case, which: str) -> None:
    """concat = weights·V with heads side by side; output = out_proj(concat); the block's LayerNorm
    sits where the config says; and each block's output is what the next sublayer reads."""
    tr, model = getattr(case, which), case.model
    for kind, layer in sorted(case.full.sublayers):
        s = tr.sublayer(kind, layer)
        attn, block = attn_and_block(model, kind, layer)
        z = s.weights @ s.v  # (H, Q, dh)
        assert np.abs(z.transpose(1, 0, 2).reshape(s.concat.shape) - s.concat).max() <= 1e-5
        with torch.no_grad():
            assert np.abs(attn.out_proj(t(s.concat)).numpy() - s.output).max() <= 1e-5
            if model.config.norm == "post":
                assert np.abs(s.norm_input - (s.residual + s.output)).max() <= 1e-5
                assert np.abs(block.norm(t(s.norm_input)).numpy() - s.block_output).max() <= 1e-5
                assert np.array_equal(s.norm_output, s.block_output)
            else:
                assert np.array_equal(s.norm_input, s.residual)
                assert np.abs(block.norm(t(s.residual)).numpy() - s.norm_output).max() <= 1e-5
                assert np.abs(s.residual + s.output - s.block_output).max() <= 1e-5
    for layer in range(len(model.decoder)):
        assert np.array_equal(tr.sublayer("decoder", layer).block_output, tr.sublayer("cross", layer).residual)


def test_inputs_memory_and_logits(case: Case) -> None:
    """Layer 0 reads embedding × √d + PE; cross-attention reads the encoder's output; logits are the model's."""
    model, tr = case.model, case.full
    src, tgt = torch.tensor([case.source]), torch.tensor([case.prefix])
    with torch.no_grad():
        memory, _ = model.encode(src)
        logits = model(src, tgt)[0]
        positions = model.positions(len(case.prefix)).numpy()
    for stream, table, ids, first in ((tr.source, model.src_embed, case.source, tr.sublayer("encoder", 0)),
                                      (tr.target, model.tgt_embed, case.prefix, tr.sublayer("decoder", 0))):
        assert np.array_equal(stream.token_embedding, table.weight[ids].detach().numpy())
        assert stream.scale == (math.sqrt(model.config.d_model) if model.config.embed_scale else 1.0)
        assert np.abs(stream.token_embedding * stream.scale + stream.position - stream.total).max() <= 1e-5
        assert np.array_equal(stream.total, first.residual)
    assert np.array_equal(tr.target.position, positions)
    assert np.array_equal(case.cached.target.position, positions)
    assert np.abs(tr.memory - memory[0].numpy()).max() <= 1e-5
    assert np.abs(tr.logits - logits.numpy()).max() <= 1e-5
    assert np.abs(case.cached.logits - logits.numpy()).max() <= 1e-4


def test_hooks_are_removed_even_after_an_error(case: Case) -> None:
    assert no_hooks_left(case.model)
    with pytest.raises(ValueError, match="handles at most"):
        trace(case.model, case.source, [1] * (case.model.config.max_len + 1), use_cache=False)
    assert no_hooks_left(case.model)


@pytest.mark.parametrize("which", ["cached", "full"])
def test_a_step_of_the_whole_trace_is_the_trace_of_that_prefix(case: Case, which: str) -> None:
    """until(t) slices the trace of the whole output; tracing only <bos> .. y_t gives the same numbers
    (bit for bit with the KV cache: the same calls; within float error for one full pass)."""
    whole = getattr(case, which)
    for t in range(len(case.prefix)):
        alone = trace(case.model, case.source, case.prefix[: t + 1], use_cache=which == "cached")
        cut = whole.until(t)
        assert cut.target_ids == alone.target_ids and cut.sublayers.keys() == alone.sublayers.keys()
        pairs = [(getattr(cut, n), getattr(alone, n)) for n in ("decoder_layers", "logits", "memory")]
        pairs += [(getattr(cut.target, n), getattr(alone.target, n)) for n in ("token_embedding", "position", "total")]
        pairs += [(getattr(cut.sublayer(*key), n), getattr(alone.sublayer(*key), n)) for key in alone.sublayers for n in FIELDS]
        for got, want in pairs:
            assert got.shape == want.shape
            if which == "cached":
                assert np.array_equal(got, want)
            else:
                finite = np.isfinite(want)
                assert np.array_equal(np.isfinite(got), finite) and np.abs(got[finite] - want[finite]).max() <= 1e-5
    with pytest.raises(ValueError, match="asked for step"):
        whole.until(len(case.prefix))


def test_calls_from_another_thread_are_not_kept(case: Case) -> None:
    """A forward pass another thread runs while tracing (here: started from inside the trace) leaves no rows."""
    import threading

    other = torch.tensor([case.source[::-1]])
    main = threading.get_ident()

    def meddle(*_args) -> None:
        if threading.get_ident() != main:
            return  # the worker's own pass goes through this hook too
        worker = threading.Thread(target=lambda: case.model.encode(other))
        worker.start()
        worker.join()

    handle = case.model.positions.register_forward_hook(meddle)
    try:
        traced = trace(case.model, case.source, case.prefix, use_cache=True)
    finally:
        handle.remove()
    for key in case.cached.sublayers:
        assert np.array_equal(traced.sublayer(*key).weights, case.cached.sublayer(*key).weights)
    assert np.array_equal(traced.source.total, case.cached.source.total)
