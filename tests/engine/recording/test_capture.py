"""record_attention: what it captures, that it changes nothing, and that it cleans up after itself."""
from __future__ import annotations

import math
import threading
from contextlib import ExitStack

import pytest
import torch
from torch import nn

import attnscope
from attnscope.engine.recording.capture import record_attention
from attnscope.model.attention import split_heads
from attnscope.model.config import BOS_ID, PAD_ID
from attnscope.model.hooks import PATTERN
from attnscope.model.transformer import DecoderCache
from attnscope.records.attention import RecordError
from tests.engine_fixtures import SEEDS, atol, joined, no_hooks_left, tiny_model
from tests.support import run_threads


def batch(seed: int, b: int = 3, s: int = 7, t: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """Random source/target ids; with b > 1, row 1's source and row b-1's target end in padding."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 16, (b, s), generator=g)
    tgt = torch.randint(4, 16, (b, t), generator=g)
    tgt[:, 0] = BOS_ID
    if b > 1:
        src[1, s - 2:] = PAD_ID
        tgt[b - 1, t - 2:] = PAD_ID
    return src, tgt


def expected_shape(name: str, b: int, s: int, t: int) -> tuple[int, int, int, int]:
    if name.startswith("encoder."):
        return (b, 4, s, s)
    if name.endswith("cross_attn"):
        return (b, 4, t, s)
    return (b, 4, t, t)


# ---------------------------------------------------------------- our own model


@pytest.mark.parametrize("seed", SEEDS)
def test_one_full_tensor_per_attention_module(seed: int, device: torch.device) -> None:
    model = tiny_model(seed, device=device)
    src, tgt = (x.to(device) for x in batch(seed))
    with torch.no_grad(), record_attention(model) as rec:
        model(src, tgt)
    assert list(rec.calls) == list(model.attention_modules())  # every module, in forward order
    assert len(rec.calls) == 2 + 2 * 3
    assert all(len(calls) == 1 for calls in rec.calls.values())
    for name, w in joined(rec).items():
        assert w.shape == expected_shape(name, 3, 7, 5), name
        assert w.device.type == device.type and w.dtype == torch.float32, name
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1], device=device), atol=1e-5), name
    assert rec.notes == []


def test_padded_keys_get_exactly_zero_weight(device: torch.device) -> None:
    """Row 1's last 2 source positions and row 2's last 2 target positions are <pad>: no query sees them."""
    model = tiny_model(0, device=device)
    src, tgt = (x.to(device) for x in batch(0))
    with torch.no_grad(), record_attention(model) as rec:
        model(src, tgt)
    for name, w in joined(rec).items():
        if name.startswith("encoder.") or name.endswith("cross_attn"):
            assert torch.all(w[1, :, :, -2:] == 0) and torch.all(w[1, :, :, :-2] > 0), name
        else:
            assert torch.all(w[2, :, :, -2:] == 0), name


def test_weights_are_the_softmax_the_model_computes(device: torch.device) -> None:
    """Encoder layer 0, recomputed by hand from the module's own projections."""
    model = tiny_model(0, device=device)
    src, tgt = (x.to(device) for x in batch(0))
    with torch.no_grad(), record_attention(model) as rec:
        model(src, tgt)
        x = model.embed(src)
        attn = model.encoder[0].self_attn
        q, k = split_heads(attn.q_proj(x), 4), split_heads(attn.k_proj(x), 4)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(4)).masked_fill((src == PAD_ID)[:, None, None, :], -math.inf)
        want = scores.softmax(-1)
    got = rec.module("encoder.0.self_attn").weights
    assert (got - want).abs().max() <= (1e-6 if device.type == "cpu" else 1e-5)
    assert torch.all(got[1, :, :, -2:] == 0)  # padded source keys


@pytest.mark.parametrize("seed", SEEDS)
def test_capturing_does_not_change_the_logits(seed: int, device: torch.device) -> None:
    """Recording switches attention from fused SDPA to an explicit softmax: the same function.

    The two are different kernels, so float32 results may differ in the last bits (observed:
    about 1e-6 on logits of magnitude ~1-5, i.e. a few float32 ulps; GPU attention kernels
    reduce in other orders, so 1e-4 there). Hence a tight tolerance in float32 and, to show
    that the functions are identical, 1e-12 in float64.
    """
    model = tiny_model(seed, device=device)
    src, tgt = (x.to(device) for x in batch(seed))
    with torch.no_grad():
        plain = model(src, tgt)
        with record_attention(model):
            captured = model(src, tgt)
    tol = 1e-6 if device.type == "cpu" else 1e-4
    torch.testing.assert_close(captured, plain, rtol=tol, atol=tol)
    assert torch.equal(captured.argmax(-1), plain.argmax(-1))
    model64 = model.double()
    with torch.no_grad():
        plain64 = model64(src, tgt)
        with record_attention(model64):
            captured64 = model64(src, tgt)
    assert (captured64 - plain64).abs().max() <= 1e-12


def test_cached_decoding_calls_stack_into_the_full_matrix(device: torch.device) -> None:
    """Recording.modules pads each one-query call with zeros and stacks the calls by query."""
    model = tiny_model(1, device=device)
    src, tgt = (x.to(device) for x in batch(1, b=1))
    with torch.no_grad():
        with record_attention(model) as full:
            model(src, tgt)
        with record_attention(model) as steps:
            source = model.encode(src)
            cache = DecoderCache.empty(3)
            for t in range(tgt.shape[1]):
                model.decode(tgt[:, t:t + 1], source, cache)
    assert all(len(steps.calls[n]) == tgt.shape[1] for n in steps.calls if n.startswith("decoder."))
    for name, w in joined(full).items():
        assert steps.module(name).weights.shape == w.shape, name
        assert (steps.module(name).weights - w).abs().max() <= atol(device), name


def test_the_recording_keeps_what_a_hook_on_the_pattern_sees(device: torch.device) -> None:
    """A model built of attnscope's attention is recorded through its PATTERN hook points. Call for call (a full
    pass, then cached decoding steps), it keeps the very tensors another listener there receives, and they equal
    softmax(q kᵀ / √d_k) recomputed from the queries and keys each call was given."""
    model = tiny_model(2, device=device)
    src, tgt = (x.to(device) for x in batch(2, b=1))
    seen: dict[str, list[torch.Tensor]] = {}
    want: dict[str, list[torch.Tensor]] = {}

    def softmax(name: str, args: tuple[torch.Tensor, ...]) -> None:
        q, keys, _values, mask, *_ = args
        scores = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
        want.setdefault(name, []).append((scores if mask is None else scores.masked_fill(~mask, -math.inf)).softmax(-1))

    with ExitStack() as listening:
        for name, m in model.attention_modules().items():
            listening.callback(m.register_forward_pre_hook(lambda _m, args, name=name: softmax(name, args)).remove)
            m.hooks.listen(listening, PATTERN, lambda w, name=name: seen.setdefault(name, []).append(w))
        with torch.no_grad(), record_attention(model) as rec:
            model(src, tgt)
            source = model.encode(src)
            cache = DecoderCache.empty(3)
            for t in range(tgt.shape[1]):
                model.decode(tgt[:, t:t + 1], source, cache)
    assert rec.calls.keys() == seen.keys() == want.keys()
    for name, calls in rec.calls.items():
        assert len(calls) == len(seen[name]) == len(want[name]) > 1, name
        assert all(a is b for a, b in zip(calls, seen[name])), name
        for got, expected in zip(calls, want[name]):
            assert got.dtype == torch.float32 and (got - expected).abs().max() <= atol(device), name


def test_a_recording_nested_in_another_gets_the_same_weights() -> None:
    """Each recording has hooks of its own; both keep the same tensors."""
    model = tiny_model(3)
    src, tgt = batch(3)
    with torch.no_grad(), record_attention(model) as outer:
        with record_attention(model) as inner:
            model(src, tgt)
        assert not no_hooks_left(model)  # the outer hooks stay until the outer block ends
    assert no_hooks_left(model)
    assert outer.calls.keys() == inner.calls.keys() == model.attention_modules().keys()
    assert all(a[0] is b[0] for a, b in zip(outer.calls.values(), inner.calls.values()))


def test_hooks_are_removed_afterwards() -> None:
    model = tiny_model(0)
    src, tgt = batch(0)
    with torch.no_grad(), record_attention(model) as rec:
        assert not no_hooks_left(model)  # hooks are there while recording...
        model(src, tgt)
    assert no_hooks_left(model)  # ...and gone afterwards
    n_calls = sum(len(c) for c in rec.calls.values())
    with torch.no_grad():
        model(src, tgt)
    assert sum(len(c) for c in rec.calls.values()) == n_calls  # nothing recorded after the block


def test_hooks_are_removed_when_the_forward_raises() -> None:
    model = tiny_model(0)
    model.train()
    with pytest.raises(ValueError, match="at most 32"):
        with pytest.warns(UserWarning), record_attention(model):
            model(torch.ones(1, 40, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))
    assert no_hooks_left(model)
    assert model.training  # mode restored too
    assert torch.backends.mha.get_fastpath_enabled()


def test_a_training_model_is_recorded_in_eval_mode_and_restored() -> None:
    model = tiny_model(2, dropout=0.3, attention_dropout=0.3)
    src, tgt = batch(2)
    model.train()
    seen_modes = []
    recordings = []
    for _ in range(2):
        with pytest.warns(UserWarning, match="switched to eval mode"):
            with torch.no_grad(), record_attention(model) as rec:
                seen_modes.append({m.training for m in model.modules()})
                model(src, tgt)
        recordings.append(rec)
    assert seen_modes == [{False}, {False}]
    assert all(m.training for m in model.modules())
    for rec in recordings:
        assert len(rec.notes) == 1 and "training mode" in rec.notes[0] and "eval mode" in rec.notes[0]
    # no dropout on the weights: two recordings are identical and every row sums to 1
    for name, w in joined(recordings[0]).items():
        assert torch.equal(w, recordings[1].module(name).weights), name
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5), name


def test_each_submodule_gets_its_own_mode_back() -> None:
    model = tiny_model(3, dropout=0.3)
    model.train()
    model.encoder.eval()  # e.g. a frozen encoder while fine-tuning the decoder
    before = {name: m.training for name, m in model.named_modules()}
    with pytest.warns(UserWarning, match="switched to eval mode"), torch.no_grad(), record_attention(model):
        assert not any(m.training for m in model.modules())
        model(*batch(3))
    assert {name: m.training for name, m in model.named_modules()} == before


def test_an_eval_model_stays_in_eval_mode_without_notes() -> None:
    model = tiny_model(0)
    with torch.no_grad(), record_attention(model) as rec:
        model(*batch(0))
    assert rec.notes == []
    assert not any(m.training for m in model.modules())


def test_concurrent_recordings_on_one_model_each_get_their_own_weights() -> None:
    model = tiny_model(3)
    inputs = [batch(100 + i, b=1 + i % 2, s=4 + i, t=3 + i) for i in range(5)]
    with torch.no_grad():
        reference = []
        for src, tgt in inputs:
            with record_attention(model) as rec:
                model(src, tgt)
            reference.append(joined(rec))
    start = threading.Barrier(len(inputs))
    results: dict[int, list[dict[str, torch.Tensor]]] = {i: [] for i in range(len(inputs))}

    def work(i: int) -> None:
        start.wait()
        for _ in range(4):
            with torch.no_grad(), record_attention(model) as rec:
                model(*inputs[i])
            assert all(len(calls) == 1 for calls in rec.calls.values())
            results[i].append(joined(rec))

    run_threads(work, [(i,) for i in range(len(inputs))])
    for i, runs in results.items():
        assert len(runs) == 4
        for weights in runs:
            assert weights.keys() == reference[i].keys()
            for name, w in weights.items():
                assert torch.equal(w, reference[i][name]), (i, name)
    assert no_hooks_left(model)
    assert torch.backends.mha.get_fastpath_enabled()


def test_forward_passes_of_other_threads_are_not_recorded() -> None:
    """Another thread runs the shared model while hooks are installed: its weights are ignored."""
    model = tiny_model(4)
    mine, theirs = batch(4, b=1), batch(5, b=2)
    with torch.no_grad(), record_attention(model) as ref:
        model(*mine)

    def other() -> None:
        with torch.no_grad():
            model(*theirs)  # no recording, no lock: runs while the main thread's hooks are installed

    with torch.no_grad(), record_attention(model) as rec:
        run_threads(other, [()])
        model(*mine)
    assert all(len(calls) == 1 for calls in rec.calls.values())
    for name, w in joined(rec).items():
        assert torch.equal(w, ref.module(name).weights), name


# ---------------------------------------------------------------- torch.nn models


def padding_masks(b: int, s: int, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """True = padded. Row 1 has 3 padded source positions, row 0 has 2 padded target positions."""
    src_pad = torch.zeros(b, s, dtype=torch.bool)
    src_pad[1, s - 3:] = True
    tgt_pad = torch.zeros(b, t, dtype=torch.bool)
    tgt_pad[0, t - 2:] = True
    return src_pad, tgt_pad


def check_maps(w: torch.Tensor, shape: tuple[int, ...], padded_keys: torch.Tensor) -> None:
    assert w.shape == shape
    assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5)
    assert torch.all(w.transpose(1, 3)[padded_keys] == 0)  # (B, K, Q, H)[b, k] for padded keys


NESTED_PROTOTYPE = "ignore:The PyTorch API of nested tensors is in prototype stage:UserWarning"


@pytest.mark.filterwarnings(NESTED_PROTOTYPE)
def test_nn_transformer_with_padding_gives_full_size_maps() -> None:
    torch.manual_seed(0)
    model = nn.Transformer(d_model=16, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32,
                           dropout=0.0, batch_first=True).eval()
    b, s, t = 3, 8, 5
    src, tgt = torch.randn(b, s, 16), torch.randn(b, t, 16)
    src_pad, tgt_pad = padding_masks(b, s, t)
    kw = dict(src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad,
              tgt_mask=torch.triu(torch.ones(t, t, dtype=torch.bool), 1))  # True = may not attend
    with torch.no_grad():
        plain = model(src, tgt, **kw)
        with record_attention(model) as rec:
            captured = model(src, tgt, **kw)
    assert len(rec.modules) == 2 + 2 * 2
    for name, w in joined(rec).items():
        if name.startswith("encoder."):
            check_maps(w, (b, 4, s, s), src_pad)
        elif name.endswith("multihead_attn"):
            check_maps(w, (b, 4, t, s), src_pad)
        else:
            check_maps(w, (b, 4, t, t), tgt_pad)
            upper = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
            assert torch.all(w[..., upper] == 0), name
    assert (captured - plain).abs().max() <= 1e-5
    assert no_hooks_left(model)
    assert torch.backends.mha.get_fastpath_enabled()


@pytest.mark.filterwarnings(NESTED_PROTOTYPE)
def test_nested_tensor_encoder_gives_full_size_maps() -> None:
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    assert encoder.use_nested_tensor
    b, s = 3, 9
    x = torch.randn(b, s, 16)
    src_pad, _ = padding_masks(b, s, 1)
    with torch.no_grad():
        plain = encoder(x, src_key_padding_mask=src_pad)
        with record_attention(encoder) as rec:
            captured = encoder(x, src_key_padding_mask=src_pad)
    assert [m.name for m in rec.modules] == ["layers.0.self_attn", "layers.1.self_attn"]
    for w in (m.weights for m in rec.modules):
        check_maps(w, (b, 4, s, s), src_pad)
    assert torch.all(plain[src_pad] == 0)  # without recording, the nested-tensor fast path really ran
    keep = ~src_pad
    assert (captured[keep] - plain[keep]).abs().max() <= 1e-5  # the fast path zeroes padded rows; compare the rest
    assert torch.backends.mha.get_fastpath_enabled()


class HandWritten(nn.Module):
    """A minimal encoder-decoder that calls nn.MultiheadAttention positionally, without weights."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.MultiheadAttention(16, 4, batch_first=True)
        self.dec = nn.MultiheadAttention(16, 4, batch_first=True)
        self.cross = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
        memory = self.enc(src, src, src, src_pad, False)[0]  # (query, key, value, key_padding_mask, need_weights)
        causal = torch.triu(torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool), 1)
        h = self.dec(tgt, tgt, tgt, None, False, causal)[0]
        return self.cross(h, memory, memory, src_pad, need_weights=False)[0]


def test_hand_written_model_with_positional_args_yields_per_head_weights() -> None:
    torch.manual_seed(2)
    model = HandWritten().eval()
    b, s, t = 3, 7, 4
    src, tgt = torch.randn(b, s, 16), torch.randn(b, t, 16)
    src_pad, _ = padding_masks(b, s, t)
    with torch.no_grad():
        plain = model(src, tgt, src_pad)
        with record_attention(model) as rec:
            captured = model(src, tgt, src_pad)
        direct = model.enc(src, src, src, key_padding_mask=src_pad, need_weights=True, average_attn_weights=False)[1]
    assert [m.name for m in rec.modules] == ["enc", "dec", "cross"]
    check_maps(rec.module("enc").weights, (b, 4, s, s), src_pad)
    check_maps(rec.module("dec").weights, (b, 4, t, t), torch.zeros(b, t, dtype=torch.bool))
    assert torch.all(rec.module("dec").weights[..., torch.triu(torch.ones(t, t, dtype=torch.bool), 1)] == 0)
    check_maps(rec.module("cross").weights, (b, 2, t, s), src_pad)
    assert (rec.module("enc").weights - direct).abs().max() <= 1e-6
    assert (captured - plain).abs().max() <= 1e-5
    assert no_hooks_left(model)


def test_unbatched_multihead_attention_gets_a_batch_axis() -> None:
    torch.manual_seed(3)
    mha = nn.MultiheadAttention(8, 2).eval()
    x = torch.randn(5, 8)  # (L, E): unbatched
    with torch.no_grad(), record_attention(mha) as rec:
        mha(x, x, x, need_weights=False)
    assert [m.name for m in rec.modules] == [""]
    assert rec.module("").weights.shape == (1, 2, 5, 5)


# ---------------------------------------------------------------- global state and errors


def test_fastpath_is_enabled_again_after_recording() -> None:
    assert torch.backends.mha.get_fastpath_enabled()
    model = tiny_model(0)
    with torch.no_grad(), record_attention(model):
        assert not torch.backends.mha.get_fastpath_enabled()
        model(*batch(0))
    assert torch.backends.mha.get_fastpath_enabled()


def test_fastpath_stays_off_if_the_user_turned_it_off() -> None:
    model = tiny_model(0)
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with torch.no_grad(), record_attention(model):
            model(*batch(0))
        assert not torch.backends.mha.get_fastpath_enabled()
    finally:
        torch.backends.mha.set_fastpath_enabled(True)


def test_a_module_without_attention_gives_an_empty_recording_and_a_clear_error() -> None:
    module = nn.Sequential(nn.Linear(4, 4), nn.ReLU())  # in training mode, as built
    with pytest.warns(UserWarning, match="eval mode"), record_attention(module) as rec:
        module(torch.randn(2, 3, 4).softmax(-1))  # a softmax, but of no q @ kᵀ product
    assert rec.calls == {} and rec.modules == ()
    with pytest.raises(RecordError, match="nothing was recorded for encoder, decoder, cross attention; recorded: nothing"):
        rec.to_record(["a"], ["b"])
    assert module.training
    assert no_hooks_left(module)
    assert torch.backends.mha.get_fastpath_enabled()


def test_the_result_is_typed_and_an_unknown_module_is_named() -> None:
    """record_attention gives each module's name, kind and joined weights; asking for a module it did not record
    says which it did."""
    model = tiny_model(0)
    src, tgt = batch(0)
    with torch.no_grad(), record_attention(model) as rec:
        model(src, tgt)
    assert [m.name for m in rec.modules] == list(model.attention_modules())
    assert [m.kind for m in rec.modules] == [m.kind for m in model.attention_modules().values()]
    assert all(isinstance(m, attnscope.ModuleAttention) and m.weights.dim() == 4 for m in rec.modules)
    with pytest.raises(RecordError, match="nothing was recorded for 'decoder.9.self_attn'; recorded: encoder.0.self_attn"):
        rec.module("decoder.9.self_attn")
