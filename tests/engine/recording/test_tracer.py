"""The tracer: each flag keeps what it says and nothing more; every kept value is what the model computed,
checked against the model's own modules called directly (not the packed projections the forward pass uses),
cached and not; capture's native path is its weights-only mode."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnscope.engine.recording.capture import record_attention
from attnscope.engine.recording.trace import EVERYTHING, WEIGHTS, Keep, Trace, kept
from attnscope.engine.recording.tracer import trace, tracing
from attnscope.model.attention import split_heads
from attnscope.model.hooks import PATTERN, sites
from tests.engine.inside.inside_fixtures import VARIANTS, Case, inside_trace, make_case
from tests.engine_fixtures import T5, no_hooks_left, tiny_model

FIELDS = ("q", "k", "v", "scores", "weights", "concat", "output", "residual", "norm_input", "norm_output", "block_output")


@pytest.fixture(scope="module", params=list(VARIANTS))
def case(request: pytest.FixtureRequest) -> Case:
    return make_case(request.param)


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
    q·k/√dh (T5: q·k plus the stack's position bias) with -inf exactly on future keys; the weights are their softmax."""
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
        manual = s.q @ s.k.transpose(0, 2, 1) / (math.sqrt(s.q.shape[-1]) if model.config.scale_scores else 1.0)
        if kind != "cross" and model.config.positional == "relative":  # T5: the stack's bias, from its table
            stack = model.encoder if kind == "encoder" else model.decoder
            manual = manual + stack[0].relative_bias(n_q, n_k)[0].detach().numpy()
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
        memory = model.encode(src).memory
        logits = model(src, tgt)[0]
        positions = model.positions(len(case.prefix)).numpy()
    start = model.config.decoder_start  # T5's first decoder position reads <pad>, whatever the prefix says
    read = case.prefix if start is None else [start, *case.prefix[1:]]
    for stream, table, ids, first in ((tr.source, model.src_embed, case.source, tr.sublayer("encoder", 0)),
                                      (tr.target, model.tgt_embed, read, tr.sublayer("decoder", 0))):
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
        trace(case.model, case.source, [1] * (case.model.config.max_len + 1))
    assert no_hooks_left(case.model)


@pytest.mark.parametrize("which", ["cached", "full"])
def test_a_step_of_the_whole_trace_is_the_trace_of_that_prefix(case: Case, which: str) -> None:
    """until(t) slices the trace of the whole output; tracing only <bos> .. y_t gives the same numbers
    (bit for bit with the KV cache: the same calls; within float error for one full pass)."""
    whole = getattr(case, which)
    for t in range(len(case.prefix)):
        alone = inside_trace(case.model, case.source, case.prefix[: t + 1], which == "cached")
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
        traced = inside_trace(case.model, case.source, case.prefix, True)
    finally:
        handle.remove()
    for key in case.cached.sublayers:
        assert np.array_equal(traced.sublayer(*key).weights, case.cached.sublayer(*key).weights)
    assert np.array_equal(traced.source.total, case.cached.source.total)


FLAGS = [Keep(w, i, s) for w in (False, True) for i in (False, True) for s in (False, True)]
ALL_KINDS = ("encoder", "decoder", "cross")


def _sublayers(tr: Trace) -> list:
    return [s for kind in ALL_KINDS for s in tr.sublayers(kind)]


def _parts(tr: Trace) -> dict[str, list]:
    """Every part of a trace by the flag that keeps it."""
    layers = [*tr.encoder, *tr.decoder]
    return {"weights": [s.weights for s in _sublayers(tr)],
            "internals": [s.internals for s in _sublayers(tr)],
            "stream": [s.stream for s in _sublayers(tr)] + [x for lt in layers for x in (lt.inputs, lt.output)]
            + [tr.source, tr.target, tr.memory]}


def _tensors(value) -> list[torch.Tensor]:
    """The tensors of a kept part (a tensor, or a dataclass of tensors and a scale)."""
    if isinstance(value, torch.Tensor):
        return [value]
    return [v for v in vars(value).values() if isinstance(v, torch.Tensor)]


@pytest.mark.parametrize("keep", FLAGS, ids=str)
@pytest.mark.parametrize("use_cache", [False, True])
def test_each_flag_keeps_what_it_says_and_nothing_else(keep: Keep, use_cache: bool) -> None:
    """A part is there exactly when its flag is set, and holds the numbers the full trace holds (bit for bit
    while the weights or internals are hooked: the same explicit path; within float error when only the stream
    is, since attention then runs through the fused kernel)."""
    model, source, prefix = tiny_model(3, norm="pre"), [5, 6, 7, 8, 3], [2, 9, 10, 11]
    full, got = trace(model, source, prefix, use_cache=use_cache), trace(model, source, prefix, keep=keep, use_cache=use_cache)
    assert got.keep == keep and no_hooks_left(model)
    same_path = keep.weights or keep.internals
    for flag, parts in _parts(got).items():
        want = _parts(full)[flag]
        if not getattr(keep, flag):
            assert all(p is None for p in parts), flag
            continue
        for part, reference in zip(parts, want):
            for x, y in zip(_tensors(part), _tensors(reference)):
                assert torch.equal(x, y) if same_path else torch.allclose(x, y, atol=1e-5), flag
    assert torch.allclose(got.logits, full.logits, atol=1e-5)


def test_weights_only_keeps_no_q_k_v_and_no_stream() -> None:
    model = tiny_model(1)
    tr = trace(model, [5, 6, 7, 3], [2, 8, 9], keep=WEIGHTS)
    assert all(s.internals is None and s.stream is None and s.weights is not None for s in _sublayers(tr))
    assert tr.source is None and tr.memory is None and all(lt.inputs is None for lt in tr.decoder)
    with pytest.raises(ValueError, match="not kept"):
        kept(tr.sublayer("cross", 0).internals)
    with pytest.raises(ValueError, match="needs"):
        tr.require(Keep(internals=True))
    assert tr.require(WEIGHTS) is tr


def test_capture_is_the_weights_only_mode() -> None:
    """While recording a model built of attnscope's attention, capture is the tracer's weights-only mode: one listener
    on each attention's PATTERN hook point, nothing else; a trace nested in it adds its own there and sees the same
    weights."""
    model = tiny_model(2)
    attention = model.attention_modules()
    src, tgt = torch.tensor([[5, 6, 7, 3]]), torch.tensor([[2, 8, 9]])
    with record_attention(model) as rec:
        assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
        listened = {(name, point) for name, hooks in sites(model) for point in hooks.listeners}
        assert listened == {(name, PATTERN.name) for name in attention}
        with tracing(model, WEIGHTS) as nested:
            assert all(len(m.hooks.listeners[PATTERN.name]) == 2 for m in attention.values())
            model(src, tgt)
    assert all(torch.equal(a, b) for name in attention for a, b in zip(rec.calls[name], nested.weights[name], strict=True))
    assert no_hooks_left(model)


def test_layer_inputs_and_outputs_are_the_layers_run_by_hand() -> None:
    """The stream against an independent pass: the model's layers called one after another, no hooks."""
    model = tiny_model(4, norm="post", final_norm=True)
    source, prefix = [5, 6, 7, 8, 9, 3], [2, 10, 11, 12, 13]
    tr = trace(model, source, prefix, keep=Keep(weights=False, stream=True))
    src, tgt = torch.tensor([source]), torch.tensor([prefix])
    with torch.no_grad():
        x = model.embed(src)
        assert torch.allclose(kept(tr.source).total, x, atol=1e-6)
        for lt, layer in zip(tr.encoder, model.encoder):
            assert torch.allclose(kept(lt.inputs), x, atol=1e-5)
            x = layer(x, None)[0]
            assert torch.allclose(kept(lt.output), x, atol=1e-5)
        memory = model.encoder_norm(x)
        assert torch.allclose(kept(tr.memory), memory, atol=1e-5)
        y = model.embed(tgt, decoder=True)
        mask = torch.ones(len(prefix), len(prefix), dtype=torch.bool).tril()[None, None]
        for lt, layer in zip(tr.decoder, model.decoder):
            assert torch.allclose(kept(lt.inputs), y, atol=1e-5)
            y = layer(y, memory, mask, None)[0]
            assert torch.allclose(kept(lt.output), y, atol=1e-5)
        assert torch.allclose(tr.logits, model.generator(model.decoder_norm(y)), atol=1e-5)


def _allowed(mask: torch.Tensor | None, shape: torch.Size) -> torch.Tensor:
    return torch.ones(shape, dtype=torch.bool) if mask is None else mask.expand(shape)


def test_the_joined_mask_of_cached_steps_is_the_full_pass_mask(case: Case) -> None:
    """With the cache every step has its own mask (None: every cached key); joined, they are the causal mask
    of the one-pass trace, and every weight they forbid is 0."""
    full = trace(case.model, case.source, case.prefix)
    cached = trace(case.model, case.source, case.prefix, use_cache=True)
    for kind in ("decoder", "cross"):
        for a, b in zip(full.sublayers(kind), cached.sublayers(kind)):
            shape = kept(a.weights).shape
            allowed = _allowed(kept(b.internals).mask, shape)
            assert torch.equal(_allowed(kept(a.internals).mask, shape), allowed), kind
            assert torch.all(kept(b.weights)[~allowed] == 0)
    assert all(kept(s.internals).mask is None for s in cached.sublayers("cross"))  # the source has no padding
    n = len(case.prefix)
    assert torch.equal(kept(cached.sublayer("decoder", 0).internals).mask[0, 0], torch.ones(n, n, dtype=torch.bool).tril())


def test_the_stream_needs_attnscopes_transformer() -> None:
    from attnscope.model.attention import MultiHeadAttention

    attn = MultiHeadAttention(d_model=8, n_heads=2, dropout=0.0, kind="encoder")
    with pytest.raises(TypeError, match="Transformer"):
        with tracing(attn, EVERYTHING):
            pass
    assert no_hooks_left(attn)



@pytest.mark.parametrize("use_cache", [False, True])
def test_a_t5_model_is_traced_with_its_position_bias_in_the_scores(use_cache: bool) -> None:
    """On a T5 config (tests/model/test_t5.py checks it against transformers) the scores are q·k unscaled plus the
    stack's relative position bias (none in cross-attention), -inf where masked; the weights their softmax; the
    positions added to the embeddings zeros; the logits the model's own."""
    model = tiny_model(4, **T5)
    with torch.no_grad():
        for stack in (model.encoder, model.decoder):
            stack[0].relative_bias.table.weight.normal_(0.0, 3.0)  # large enough to decide the weights
    source, prefix = [5, 6, 7, 8, 9, 10, 11, 3], [1, 12, 13, 14, 15, 4, 5]
    tr = trace(model, source, prefix, use_cache=use_cache)
    assert no_hooks_left(model)
    for kind, stack in (("encoder", model.encoder), ("decoder", model.decoder), ("cross", None)):
        for s in tr.sublayers(kind):
            inside = kept(s.internals)
            expected = inside.queries @ inside.keys.mT
            if stack is not None:
                expected = expected + stack[0].relative_bias(*expected.shape[-2:])
                finite = torch.isfinite(inside.scores)  # the bias as handed to the call (the cache's steps joined)
                assert torch.equal(inside.bias.expand_as(finite)[finite],
                                   stack[0].relative_bias(*expected.shape[-2:]).expand_as(finite)[finite]), kind
            else:
                assert inside.bias is None
            if inside.mask is not None:
                expected = expected.masked_fill(~inside.mask, -math.inf)
            finite = torch.isfinite(expected)
            assert torch.equal(finite, torch.isfinite(inside.scores)), kind
            assert (inside.scores[finite] - expected[finite]).abs().max() < 1e-5, kind
            assert torch.allclose(inside.scores.softmax(-1), s.weights, atol=1e-6), kind
    assert not torch.any(kept(tr.source).position) and kept(tr.target).scale == 1.0
    with torch.no_grad():
        assert torch.allclose(tr.logits, model(torch.tensor([source]), torch.tensor([prefix])), atol=1e-5)
