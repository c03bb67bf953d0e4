"""Recording attention in the user's own code (M1, M2, M3): nothing the code receives changes, every call is
kept, kinds (encoder self, decoder self, cross) are labelled, and a loop that re-runs the whole prefix gives
one row per step, the same rows attnscope's cached decoding computes."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import attnscope
from attnscope.engine.recording.capture import record_attention
from attnscope.records.attention import RecordError
from attnscope.viz.explorer import Selection, payload
from tests.byom_models import (
    M2_SPECIALS,
    WORDS,
    M3Seq2Seq,
    Seq2SeqTransformer,
    m1_greedy_decode,
    m1_source,
    m1_vocab,
    m2_greedy_decode,
    m3_greedy,
    make_model,
)

SENTENCE = "Zwei Hunde laufen durch den Schnee ."


@pytest.mark.parametrize("kwargs", [{}, {"need_weights": False}, {"average_attn_weights": False},
                                    {"need_weights": True, "average_attn_weights": True}])
@pytest.mark.parametrize("batched", [True, False])
def test_multihead_attention_returns_what_the_caller_asked_for(kwargs: dict, batched: bool) -> None:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 8) if batched else torch.randn(5, 8)
    with torch.no_grad():
        plain_out, plain_w = mha(x, x, x, **kwargs)
        with record_attention(mha) as rec:
            out, w = mha(x, x, x, **kwargs)
    assert torch.allclose(out, plain_out, atol=1e-6)
    if plain_w is None:
        assert w is None
    else:
        assert w.shape == plain_w.shape and torch.allclose(w, plain_w, atol=1e-6)
    assert rec.calls[""][0].shape == ((2, 2, 5, 5) if batched else (1, 2, 5, 5))  # per head, whatever was asked


def test_every_call_is_kept_and_kinds_come_from_names_or_the_caller() -> None:
    torch.manual_seed(1)
    model = M3Seq2Seq(12, 12).eval()
    src = torch.tensor([[1, 5, 6, 7, 2]])
    with torch.no_grad(), record_attention(model) as rec:
        m3_greedy(model, src, 1, 2, 4)
    names = list(rec.calls)
    assert rec.kinds["encoder.0.self_attn.mhsa"] == "encoder"  # recorded although it passes need_weights=False
    assert rec.kinds["decoder.1.self_attn.mhsa"] == "decoder" and rec.kinds["decoder.1.cross_attn.mhsa"] == "cross"
    assert len(rec.calls["encoder.0.self_attn.mhsa"]) == 1 and len(rec.calls["decoder.0.cross_attn.mhsa"]) == 4
    assert rec.by_kind()["cross"] == [n for n in names if "cross" in n]

    class Opaque(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.MultiheadAttention(8, 2, batch_first=True), nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(x, self.a(x, x, x)[0], x)[0]

    opaque = Opaque().eval()
    with torch.no_grad(), record_attention(opaque, kinds={"a": "encoder"}) as rec:
        opaque(torch.randn(1, 3, 8))
    assert rec.kinds == {"a": "encoder", "b": None}
    with pytest.raises(RecordError, match=r"cannot tell the kind of b \(self-attention\): pass kinds=\{'b': "):
        rec.by_kind()


def test_m1_tutorial_greedy_loop_records_the_rows_of_our_cached_decoding() -> None:
    """The tutorial's greedy_decode re-runs the decoder on the whole prefix: one row per step, not a stack."""
    torch.manual_seed(3)
    itos = m1_vocab(WORDS)
    m1 = Seq2SeqTransformer(2, 2, 16, 4, len(itos), len(itos), 32).eval()
    src = m1_source(itos, SENTENCE)
    with record_attention(m1) as rec:
        ids = m1_greedy_decode(m1, src, 8)
    n_steps = len(ids) - 1
    cross = rec.module("transformer.decoder.layers.1.multihead_attn").weights
    assert len(rec.calls["transformer.decoder.layers.1.multihead_attn"]) == n_steps
    assert cross.shape == (1, 4, n_steps, src.shape[0])  # not [1, 4, 1 + 2 + ... + n, S]
    tr = attnscope.import_model(m1, itos, itos, source_framing="bos-eos")
    ours = tr.translate(SENTENCE, max_len=n_steps)
    assert [tr.bundle.src_codec.tokenizer.id_to_token(i) for i in ours.source_ids][1:-1] == SENTENCE.split()
    record = rec.to_record(ours.source_tokens, ours.target_tokens)
    for kind in ("encoder", "decoder", "cross"):
        assert np.allclose(record.array(kind), ours.attention.array(kind), atol=1e-5), kind
    assert payload(record, view_id="m", selection=Selection("cross", 1, 0))  # the explorer draws a recorded model


def test_annotated_transformer_weights_kept_on_self_attn_are_recorded() -> None:
    torch.manual_seed(4)
    m2 = make_model(len(WORDS) + 4, len(WORDS) + 4, d_model=16, d_ff=32).eval()
    itos = M2_SPECIALS + WORDS
    src = torch.tensor([[0, *[itos.index(w) for w in SENTENCE.split()], 1]])
    with record_attention(m2) as rec:
        ids = m2_greedy_decode(m2, src, 8)
    assert rec.kinds["decoder.layers.0.src_attn"] == "cross"
    assert rec.kinds["decoder.layers.0.self_attn"] == "decoder"
    tr = attnscope.import_model(m2, itos, itos, source_framing="bos-eos")
    ours = tr.translate(SENTENCE, max_len=len(ids) - 1)
    record = rec.to_record(ours.source_tokens, ours.target_tokens)
    for kind in ("encoder", "decoder", "cross"):
        assert np.allclose(record.array(kind), ours.attention.array(kind), atol=1e-5), kind


def test_m3_prefix_loop_rows_equal_one_full_pass() -> None:
    torch.manual_seed(5)
    model = M3Seq2Seq(12, 12).eval()
    src = torch.tensor([[1, 5, 6, 7, 8, 2]])
    with record_attention(model) as loop:
        ids = m3_greedy(model, src, 1, 2, 6)
    with torch.no_grad(), record_attention(model) as full:
        model.decode(torch.tensor([[1, *ids[:-1]]]), model.encode(src))
    for name in full.calls:
        if not name.startswith("encoder"):
            assert torch.allclose(loop.module(name).weights, full.module(name).weights, atol=1e-5), name
    tokens = [f"t{i}" for i in [1, *ids[:-1]]]
    record = loop.to_record([f"s{i}" for i in src[0].tolist()], tokens)
    assert record.cross.shape == (2, 2, len(ids), 6)
