"""Attention in the user's own code: softmaxes over q·kᵀ inside any module's forward and calls of
F.scaled_dot_product_attention are recorded with no glue; the caller's outputs stay bit for bit what they were;
kinds come from where queries and keys came from; the mode exists only inside the context."""
from __future__ import annotations

import math
import threading

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnscope.engine.recording.attention_mode import AttentionMode, sdpa_weights
from attnscope.engine.recording.capture import record_attention
from attnscope.records.attention import RecordError
from tests.engine_fixtures import joined, no_hooks_left, tiny_model
from tests.support import run_threads


class Attend(nn.Module):
    """Multi-head attention written by hand: an explicit softmax, or the fused kernel; returns no weights."""

    def __init__(self, d: int = 16, heads: int = 4, fused: bool = False, kv_heads: int | None = None) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.fused = heads, kv_heads or heads, fused
        dh = d // heads
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, dh * self.kv_heads), nn.Linear(d, dh * self.kv_heads)
        self.o = nn.Linear(d, d)

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        kv = x if memory is None else memory
        b, t, d = x.shape
        q = self.q(x).view(b, t, self.heads, -1).transpose(1, 2)  # (B, H, T, dh)
        k = self.k(kv).view(b, kv.shape[1], self.kv_heads, -1).transpose(1, 2)  # (B, Hkv, S, dh)
        v = self.v(kv).view(b, kv.shape[1], self.kv_heads, -1).transpose(1, 2)
        if self.fused:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                                 enable_gqa=self.kv_heads != self.heads)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, S)
            if causal:
                scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            out = scores.softmax(-1) @ v
        return self.o(out.transpose(1, 2).reshape(b, t, d))


class Layer(nn.Module):
    def __init__(self, fused: bool, cross: bool) -> None:
        super().__init__()
        self.attend = Attend(fused=fused)
        self.memory_reader = Attend(fused=fused) if cross else None  # a name that says nothing of cross-attention
        self.ff = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
        self.norm = nn.LayerNorm(16)

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None) -> Tensor:
        x = x + self.attend(x, causal=self.memory_reader is not None)
        if self.memory_reader is not None:
            x = x + self.memory_reader(x, memory, mask)
        return self.norm(x + self.ff(x))


class Seq2Seq(nn.Module):
    """Encoder and decoder stacks under names that do not say which is which."""

    def __init__(self, fused: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 16)
        self.stack_a = nn.ModuleList(Layer(fused, cross=False) for _ in range(2))
        self.stack_b = nn.ModuleList(Layer(fused, cross=True) for _ in range(2))
        self.out = nn.Linear(16, 12)

    def encode(self, src: Tensor) -> Tensor:
        x = self.embed(src)
        for layer in self.stack_a:
            x = layer(x)
        return x

    def decode(self, tgt: Tensor, memory: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.embed(tgt)
        for layer in self.stack_b:
            x = layer(x, memory, mask)
        return self.out(x)


KINDS = {**{f"stack_a.{i}.attend": "encoder" for i in (0, 1)},
         **{f"stack_b.{i}.{m}": k for i in (0, 1) for m, k in (("attend", "decoder"), ("memory_reader", "cross"))}}


def greedy(model: Seq2Seq, src: Tensor, steps: int) -> tuple[list[int], Tensor]:
    """Whole-prefix greedy decoding; the ids and the last step's logits."""
    with torch.no_grad():
        memory = model.encode(src)
        ids = [1]
        for _ in range(steps):
            logits = model.decode(torch.tensor([ids]), memory)
            ids.append(int(logits[0, -1].argmax()))
    return ids, logits


def explicit(q: Tensor, k: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
    """softmax(q kᵀ / √d) in float64: the independent reference."""
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return scores.softmax(-1)


@pytest.mark.parametrize("fused", [False, True])
def test_hand_written_attention_is_recorded_with_kinds_from_structure(fused: bool) -> None:
    torch.manual_seed(0)
    model = Seq2Seq(fused).eval()
    src = torch.tensor([[2, 3, 4, 5, 6]])
    plain_ids, plain_logits = greedy(model, src, 4)
    with record_attention(model) as rec:
        ids, logits = greedy(model, src, 4)
    assert ids == plain_ids and torch.equal(logits, plain_logits)  # bit for bit, fused kernel included
    assert rec.kinds == KINDS and rec.structure["stack_b.0.memory_reader"] == "cross"
    record = rec.to_record([f"s{i}" for i in src[0].tolist()], [f"t{i}" for i in ids[:-1]])
    with torch.no_grad():  # the reference: layer 0's projections of the same inputs, softmaxed in float64
        memory = model.encode(src)
        x = model.embed(torch.tensor([ids[:-1]]))
        attend = model.stack_b[0].attend
        q, k = (lin(x).view(1, 4, 4, 4).transpose(1, 2) for lin in (attend.q, attend.k))
        want_self = explicit(q, k, causal=True)[0]
        h = x + attend(x, causal=True)
        reader = model.stack_b[0].memory_reader
        q, k = reader.q(h).view(1, 4, 4, 4).transpose(1, 2), reader.k(memory).view(1, 5, 4, 4).transpose(1, 2)
        want_cross = explicit(q, k)[0]
    assert (torch.tensor(record.decoder[0]).double() - want_self).abs().max() <= 1e-6
    assert (torch.tensor(record.cross[0]).double() - want_cross).abs().max() <= 1e-6
    assert no_hooks_left(model) and not torch.overrides._get_current_function_mode_stack()


@pytest.mark.parametrize("variant", ["bool mask", "float mask", "causal", "scale", "gqa", "3-d"])
def test_sdpa_weights_are_what_the_fused_kernel_applies(variant: str) -> None:
    """The weights, multiplied with the values, give the kernel's own output."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 5, 8, generator=g) for _ in range(3))
    kwargs: dict = {}
    if variant == "bool mask":
        kwargs["attn_mask"] = torch.rand(2, 1, 5, 5, generator=g) > 0.3
        kwargs["attn_mask"][..., 0] = True
    elif variant == "float mask":
        kwargs["attn_mask"] = torch.randn(5, 5, generator=g)
    elif variant == "causal":
        kwargs["is_causal"] = True
    elif variant == "scale":
        kwargs["scale"] = 0.05
    elif variant == "gqa":
        k, v = k[:, :2], v[:, :2]
        kwargs["enable_gqa"] = True
    else:
        q, k, v = q[0], k[0], v[0]
    weights = sdpa_weights(q, k, kwargs.get("attn_mask"), kwargs.get("is_causal", False), kwargs.get("scale"),
                           kwargs.get("enable_gqa", False))
    values = v.repeat_interleave(2, dim=-3) if variant == "gqa" else v
    fused = F.scaled_dot_product_attention(q, k, v, **kwargs)
    assert weights.shape == q.shape[:-1] + (5,) and weights.dtype == torch.float32
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-6)
    assert (weights.double() @ values.double() - fused.double()).abs().max() <= 1e-5


class DropoutAttend(Attend):
    """Fused attention with attention dropout even in eval mode (dropout_p is the caller's to choose)."""

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None, causal: bool = False) -> Tensor:
        q = self.q(x).view(1, x.shape[1], 4, 4).transpose(1, 2)
        return F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)


def test_fused_attention_with_dropout_keeps_the_callers_random_stream() -> None:
    """dropout_p > 0 draws from the RNG: recording computes its weights beside the call and draws nothing."""
    torch.manual_seed(2)
    x = torch.randn(1, 6, 16)
    attend = DropoutAttend().eval()

    def run() -> Tensor:
        torch.manual_seed(7)
        return torch.cat([attend(x).flatten(), torch.rand(3)])  # and the next draw of the caller's generator

    with torch.no_grad():
        plain = run()
        with record_attention(attend) as rec:
            recorded = run()
    assert torch.equal(recorded, plain)
    assert rec.module("").weights.shape == (1, 4, 6, 6)


def test_a_softmax_that_is_not_attention_is_not_recorded() -> None:
    class Gate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 4)
            self.keys = nn.Parameter(torch.randn(5, 16))

        def forward(self, x: Tensor) -> Tensor:
            routing = self.proj(x).softmax(-1)  # a softmax of a projection
            tied = (x @ self.keys.T).softmax(-1)  # a product with the model's own weights, not with other activations
            scores = x @ x.transpose(-2, -1)
            over_queries = scores.softmax(-2)  # not over the keys axis
            return routing.sum() + tied.sum() + over_queries.sum()

    gate = Gate().eval()
    with torch.no_grad(), record_attention(gate) as rec:
        gate(torch.randn(2, 3, 16))
    assert rec.calls == {}


def test_kinds_override_and_the_error_for_an_unknown_kind_names_the_kinds_to_pass() -> None:
    class Flat(nn.Module):  # two self-attentions, no names, no cross-attention to tell them apart by
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = Attend(), Attend()

        def forward(self, x: Tensor) -> Tensor:
            return self.second(self.first(x))

    model = Flat().eval()
    with torch.no_grad(), record_attention(model) as rec:
        model(torch.randn(1, 3, 16))
    assert rec.kinds == {"first": None, "second": None}
    with pytest.raises(RecordError, match=r"cannot tell the kind of first \(self-attention\), second \(self-attention\): "
                                          r"pass kinds=\{'first': 'encoder', 'second': 'encoder'\}"):
        rec.to_record(["a"] * 3, ["b"] * 3)
    with pytest.raises(RecordError, match="unknown kind 'self' for first: use one of encoder, decoder, cross"):
        rec.by_kind({"first": "self"})
    torch.manual_seed(3)
    seq2seq = Seq2Seq(fused=False).eval()
    with record_attention(seq2seq, kinds={"stack_b.1.memory_reader": "decoder"}) as rec:  # the caller has the last word
        greedy(seq2seq, torch.tensor([[2, 3, 4]]), 2)
    assert rec.kinds["stack_b.1.memory_reader"] == "decoder" and rec.kinds["stack_b.0.memory_reader"] == "cross"
    with pytest.raises(RecordError, match=r"differently shaped attention, so they are not layers of one stack: "
                                          r"stack_b.0.attend \[4, 2, 2\], stack_b.1.attend \[4, 2, 2\], "
                                          r"stack_b.1.memory_reader \[4, 2, 3\]"):
        rec.to_record(["a", "b", "c"], ["x", "y"])  # a wrong kind, told in one sentence (not numpy's)


def test_the_mode_is_there_only_inside_the_context_and_only_for_models_that_need_it() -> None:
    torch.manual_seed(4)
    model = Seq2Seq(fused=True).eval()
    seen = []
    with record_attention(model):
        seen.append(len(torch.overrides._get_current_function_mode_stack()))
        with pytest.raises(RuntimeError):
            with record_attention(model):  # nothing stops a user raising inside; the mode must still go
                seen.append(len(torch.overrides._get_current_function_mode_stack()))
                raise RuntimeError("boom")
        seen.append(len(torch.overrides._get_current_function_mode_stack()))
    assert seen == [1, 2, 1] and not torch.overrides._get_current_function_mode_stack()
    assert no_hooks_left(model)
    ours = tiny_model(0)  # attnscope's own model: its hook points suffice, no mode (the shipped model's speed)
    with record_attention(ours):
        assert not torch.overrides._get_current_function_mode_stack()


def test_other_threads_running_the_model_meanwhile_are_neither_recorded_nor_slowed_by_the_mode() -> None:
    torch.manual_seed(5)
    model = Seq2Seq(fused=False).eval()
    src = torch.tensor([[2, 3, 4]])
    with record_attention(model) as alone:
        greedy(model, src, 2)
    modes_elsewhere = []

    def other() -> None:
        modes_elsewhere.append(len(torch.overrides._get_current_function_mode_stack()))
        greedy(model, torch.tensor([[5, 6, 7, 8]]), 3)  # no lock, no recording: runs while the hooks are installed

    with record_attention(model) as rec:
        run_threads(other, [()])
        greedy(model, src, 2)
    assert modes_elsewhere == [0]
    assert rec.calls.keys() == alone.calls.keys()
    for name, calls in rec.calls.items():
        assert len(calls) == len(alone.calls[name]) and all(torch.equal(a, b) for a, b in zip(calls, alone.calls[name]))


def test_recording_in_another_thread_does_not_disturb_a_concurrent_one() -> None:
    torch.manual_seed(6)
    models = [Seq2Seq(fused=bool(i % 2)).eval() for i in range(2)]
    results: dict[int, dict[str, Tensor]] = {}
    start = threading.Barrier(2)

    def work(i: int) -> None:
        start.wait()
        with record_attention(models[i]) as rec:
            greedy(models[i], torch.tensor([[2, 3, 4, 5]]), 3)
        results[i] = joined(rec)

    run_threads(work, [(0,), (1,)])
    for i in range(2):
        with record_attention(models[i]) as alone:
            greedy(models[i], torch.tensor([[2, 3, 4, 5]]), 3)
        assert results[i].keys() == joined(alone).keys()
        assert all(torch.equal(results[i][n], w) for n, w in joined(alone).items())


def test_a_call_the_recorder_cannot_follow_still_returns_its_result_and_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(7)
    model = Seq2Seq(fused=False).eval()
    src = torch.tensor([[2, 3, 4]])
    plain_ids, plain_logits = greedy(model, src, 2)

    def broken(*_args: object) -> None:
        raise RuntimeError("cannot follow this one")

    monkeypatch.setattr(AttentionMode, "_carry_scores", broken)
    with pytest.warns(UserWarning, match=r"torch calls could not be followed, so attention computed from them may be "
                                         r"missing from this recording \(first: .*RuntimeError: cannot follow this one\)"):
        with record_attention(model) as rec:
            ids, logits = greedy(model, src, 2)
    assert ids == plain_ids and torch.equal(logits, plain_logits)
    assert len(rec.notes) == 1 and "could not be followed" in rec.notes[0]
    assert no_hooks_left(model) and not torch.overrides._get_current_function_mode_stack()
