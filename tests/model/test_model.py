"""The Transformer itself: shapes, masks, both attention paths, positional encodings, norms."""
from __future__ import annotations

import math
from contextlib import ExitStack

import pytest
import torch

from attnscope.model import attention
from attnscope.model.attention import PACK_LIMIT, dropout
from attnscope.model.config import ConfigError, ModelConfig
from attnscope.model.hooks import PATTERN
from attnscope.model.positions import sinusoidal_table
from attnscope.model.transformer import DecoderCache, Transformer
from tests.engine_fixtures import atol

VARIANTS = [dict(norm=n, positional=p, tie_embeddings=t, share_embeddings=s)
            for n in ("post", "pre") for p in ("sinusoidal", "learned") for t, s in ((True, True), (False, False))] + [
    # the variants of models trained elsewhere (checkpoints/importers): BART-, Marian- and NLLB-like
    dict(positional="learned", position_offset=2, separate_positions=True, embed_norm=True, activation="gelu",
         embed_scale=False, decoder_start=2, share_embeddings=True),
    dict(sinusoid="halves", activation="silu", decoder_start=0, suppressed=(1,), qkv_bias=False),
    dict(sinusoid="fairseq", position_offset=2, norm="pre", final_norm=True, decoder_start=2, forced_first=7,
         source_prefix=(5,)),
    # T5 v1.0 and v1.1 (tests/model/test_t5.py checks them against transformers)
    dict(positional="relative", relative_buckets=8, relative_max_distance=5, layer_norm="rms", norm="pre", qkv_bias=False,
         out_bias=False, ffn_bias=False, scale_scores=False, scale_output=True, embed_scale=False, decoder_start=0,
         share_embeddings=True),
    dict(positional="relative", relative_buckets=6, relative_max_distance=4, layer_norm="rms", norm="pre", ffn="gated",
         activation="gelu_tanh", qkv_bias=False, out_bias=False, ffn_bias=False, scale_scores=False, embed_scale=False,
         decoder_start=0, share_embeddings=True, tie_embeddings=False, d_head=6),
]


def make(device: torch.device | str = "cpu", **kw) -> Transformer:
    torch.manual_seed(0)
    base = dict(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=4, d_ff=32, n_encoder_layers=2,
                n_decoder_layers=2, dropout=0.0, attention_dropout=0.0, max_len=32)
    return Transformer(ModelConfig(**(base | kw))).eval().to(device)


def ids(*shape: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Random non-special token ids, drawn on the CPU (the same ids on every device)."""
    return torch.randint(4, 30, shape).to(device)


@pytest.mark.parametrize("kw", VARIANTS)
def test_shapes_and_parameter_count(kw: dict, device: torch.device) -> None:
    model = make(device, **kw)
    out = model(ids(3, 7, device=device), ids(3, 5, device=device))
    assert out.shape == (3, 5, 30) and out.device.type == device.type
    assert model.config.parameter_count() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("kw", VARIANTS)
def test_explicit_softmax_path_equals_sdpa(kw: dict, device: torch.device) -> None:
    model = make(device, **kw)
    src, tgt = ids(2, 6, device=device), ids(2, 5, device=device)
    src[1, 4:] = 0
    tgt[1, 3:] = 0
    with torch.no_grad(), ExitStack() as listening:
        fast = model(src, tgt)
        for m in model.attention_modules().values():
            m.hooks.listen(listening, PATTERN, lambda _weights: None)
        slow = model(src, tgt)
    assert torch.allclose(fast, slow, atol=atol(device))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dropout_keeps_one_minus_p_of_the_values_scaled_up(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    x = torch.ones(400, 1000, dtype=dtype, requires_grad=True)
    y = dropout(x, 0.3, training=True)
    y.sum().backward()
    assert y.dtype == dtype and y.unique().tolist() == [0.0, pytest.approx(1 / 0.7, rel=1e-2)]
    assert float((y != 0).float().mean()) == pytest.approx(0.7, abs=3e-3)
    assert torch.equal(x.grad, y.detach())  # the gradient goes through the same mask and scale
    assert dropout(x, 0.3, training=False) is x and dropout(x, 0.0, training=True) is x


def test_no_future_leakage() -> None:
    model = make()
    src, tgt = torch.randint(4, 30, (1, 6)), torch.randint(4, 30, (1, 6))
    changed = tgt.clone()
    changed[0, 4] = (tgt[0, 4] + 1 - 4) % 26 + 4
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    assert torch.allclose(a[0, :4], b[0, :4], atol=1e-6)
    assert not torch.allclose(a[0, 4:], b[0, 4:])


def test_padding_changes_nothing(device: torch.device) -> None:
    model = make(device)
    src, tgt = ids(1, 5, device=device), ids(1, 4, device=device)
    padded_src = torch.cat([src, torch.zeros(1, 3, dtype=torch.long, device=device)], 1)
    padded_tgt = torch.cat([tgt, torch.zeros(1, 2, dtype=torch.long, device=device)], 1)
    with torch.no_grad():
        alone = model(src, tgt)
        padded = model(padded_src, padded_tgt)[:, :4]
    assert torch.allclose(alone, padded, atol=atol(device))


@pytest.mark.parametrize("kw", VARIANTS[:4] + VARIANTS[8:])
def test_incremental_decoding_matches_full_forward(kw: dict, device: torch.device) -> None:
    model = make(device, **kw)
    src, tgt = ids(2, 6, device=device), ids(2, 5, device=device)
    with torch.no_grad():
        full = model(src, tgt)
        source = model.encode(src)
        cache = DecoderCache.empty(2)
        steps = [model.decode(tgt[:, t:t + 1], source, cache).logits for t in range(5)]
    assert torch.allclose(torch.cat(steps, 1), full, atol=atol(device))
    cache.reorder(torch.tensor([1, 1], device=device))
    assert torch.equal(cache.layers[0].self_k[0], cache.layers[0].self_k[1])


def test_the_kv_cache_grows_in_place_over_a_long_target_and_equals_the_full_pass(device: torch.device) -> None:
    """30 steps one at a time (the cache's buffers outgrow their first size on the way), rows reordered on the way as
    beam search does: every step's logits and weights equal the whole target's pass over the reordered history."""
    model = make(device)
    src, tgt = ids(2, 6, device=device), ids(2, 30, device=device)
    with torch.no_grad():
        source, cache = model.encode(src), DecoderCache.empty(2)
        steps = []
        for t in range(30):
            if t == 20:  # both rows continue the second one's history
                cache.reorder(torch.tensor([1, 1], device=device))
                tgt, src = tgt[[1, 1]], src[[1, 1]]
                source = model.encode(src)
            steps.append(model.decode(tgt[:, t:t + 1], source, cache, output_attentions=True))
        full = model.decode(tgt, source, output_attentions=True)
    layer = cache.layers[0]
    assert layer.self_k.shape[2] == 30 and layer.buffers[0].shape[2] > 30  # grown, not joined anew each step
    assert layer.self_k.data_ptr() == layer.buffers[0].data_ptr()  # a view of the buffer, written in place
    for t in range(20, 30):
        assert torch.allclose(steps[t].logits[:, 0], full.logits[:, t], atol=atol(device))
        for got, whole in zip(steps[t].self_attentions, full.self_attentions):
            assert torch.allclose(got[:, :, 0], whole[:, :, t, :t + 1], atol=atol(device))


def test_gradients_flow_through_a_cache_built_step_by_step(device: torch.device) -> None:
    """With autograd recording (attribution decodes incrementally and takes gradients back), the cache joins each step
    out of place: the backward through three steps works and equals the whole target's pass's."""
    model = make(device)
    src, tgt = ids(1, 5, device=device), ids(1, 3, device=device)
    source, cache = model.encode(src), DecoderCache.empty(len(model.decoder))
    stepped = sum(model.decode(tgt[:, t:t + 1], source, cache).logits[0, 0, 3] for t in range(3))
    (by_steps,) = torch.autograd.grad(stepped, source.memory)
    whole = model.decode(tgt, source).logits[0, :, 3].sum()
    (by_whole,) = torch.autograd.grad(whole, source.memory)
    assert cache.layers[0].buffers is None and torch.allclose(by_steps, by_whole, atol=atol(device))


@pytest.mark.parametrize("limit", [PACK_LIMIT, 0])  # 0: every projection too wide to pack, as a 2048-wide model's
def test_packed_projections_equal_the_separate_ones(limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(attention, "PACK_LIMIT", limit)
    attn = make().encoder[0].self_attn
    assert (attn.qkv_weights() is None) == (limit == 0)
    x = torch.randn(2, 5, 16)

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(2, 5, 4, 4).transpose(1, 2)

    q, k, v = attn.project_qkv(x)
    assert torch.allclose(q, heads(attn.q_proj(x)), atol=1e-6)
    assert torch.allclose(attn.project_q(x), q, atol=1e-6)
    assert torch.allclose(k, heads(attn.k_proj(x)), atol=1e-6) and torch.allclose(v, heads(attn.v_proj(x)), atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(attn.project_kv(x), (k, v)))


def test_a_decode_packs_the_self_attention_weights_once_from_the_live_projections() -> None:
    model = make()
    src = torch.randint(4, 30, (1, 6))
    with torch.no_grad():
        source = model.encode(src)
        cache = DecoderCache.empty(2)
        model.decode(torch.tensor([[1]]), source, cache)
        packed = [layer.qkv_weights for layer in cache.layers]
        model.decode(torch.tensor([[5]]), source, cache)
    for layer, made, module in zip(cache.layers, packed, model.decoder):
        assert layer.qkv_weights is made  # the second step reused them
        assert all(torch.equal(a, b) for a, b in zip(made, module.self_attn.qkv_weights()))


def test_a_model_too_wide_to_pack_decodes_as_a_packed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    model, src, tgt = make(), ids(2, 6), ids(2, 5)
    with torch.no_grad():
        packed = model(src, tgt)
        monkeypatch.setattr(attention, "PACK_LIMIT", 0)
        source, cache = model.encode(src), DecoderCache.empty(2)
        steps = [model.decode(tgt[:, t:t + 1], source, cache).logits for t in range(5)]
    assert all(layer.qkv_weights is None for layer in cache.layers)  # nothing copied for the sentence
    assert torch.allclose(torch.cat(steps, 1), packed, atol=1e-5)


def test_last_only_gives_the_last_positions_logits() -> None:
    model = make()
    src, tgt = torch.randint(4, 30, (2, 6)), torch.randint(4, 30, (2, 5))
    with torch.no_grad():
        source = model.encode(src)
        last = model.decode(tgt, source, last_only=True).logits
        full = model(src, tgt)
    assert last.shape == (2, 1, 30) and torch.allclose(last, full[:, -1:], atol=1e-6)


def test_sinusoidal_table_follows_the_formula() -> None:
    table = sinusoidal_table(50, 16)
    for pos in (0, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-5)
            assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-5)


def test_too_long_input_is_refused_clearly() -> None:
    model = make()
    with pytest.raises(ValueError, match="at most 32"):
        model.encode(torch.ones(1, 40, dtype=torch.long))


def test_attention_modules_are_named_by_kind_in_forward_order() -> None:
    model = make()
    kinds = [(n, m.kind) for n, m in model.attention_modules().items()]
    assert kinds == [("encoder.0.self_attn", "encoder"), ("encoder.1.self_attn", "encoder"),
                     ("decoder.0.self_attn", "decoder"), ("decoder.0.cross_attn", "cross"),
                     ("decoder.1.self_attn", "decoder"), ("decoder.1.cross_attn", "cross")]
    assert {k: list(v) for k, v in model.attention_by_kind().items()} == {
        "encoder": ["encoder.0.self_attn", "encoder.1.self_attn"],
        "decoder": ["decoder.0.self_attn", "decoder.1.self_attn"],
        "cross": ["decoder.0.cross_attn", "decoder.1.cross_attn"]}


@pytest.mark.parametrize("bad,message", [
    (dict(d_model=10, n_heads=4), "not divisible"), (dict(dropout=1.5), "dropout"),
    (dict(positional="rotary"), "positional"), (dict(norm="mid"), "norm"), (dict(d_model=True), "must be int"),
    (dict(share_embeddings=True, tgt_vocab_size=31), "joint vocabulary"),  # a model too big: tests/model/test_budget.py
])
def test_config_validation(bad: dict, message: str) -> None:
    base = dict(src_vocab_size=30, tgt_vocab_size=30)
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**(base | bad))


def test_config_from_untrusted_dict() -> None:
    with pytest.raises(ConfigError, match="unknown fields: evil"):
        ModelConfig.from_dict({"src_vocab_size": 3, "tgt_vocab_size": 3, "evil": 1})
    with pytest.raises(ConfigError, match="lacks required"):
        ModelConfig.from_dict({"d_model": 8})
    with pytest.raises(ConfigError, match="not valid JSON"):
        ModelConfig.from_json("{")


def test_a_decoder_started_on_the_padding_token_still_reads_its_start() -> None:
    """Marian's decoder starts on <pad>: the full-prefix pass must not mask its first position (the cached one never does)."""
    config = ModelConfig(src_vocab_size=12, tgt_vocab_size=12, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
                         attention_dropout=0.0, n_encoder_layers=1, n_decoder_layers=2, bos_id=0, decoder_start=0)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    src, tgt = torch.tensor([[5, 6, 2]]), torch.tensor([[0, 7, 8]])
    with torch.no_grad():
        full = model(src, tgt)
        source = model.encode(src)
        cache = DecoderCache.empty(2)
        steps = [model.next_logits(tgt[:, i:i + 1], source, cache) for i in range(3)]
    assert torch.isfinite(full).all()
    assert torch.allclose(full[0], torch.cat(steps), atol=1e-5)
