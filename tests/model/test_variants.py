"""The config fields that models trained elsewhere need, each against an independent computation.

Defaults are attnscope's own behaviour (tests/model/test_model.py covers them); here every variant is
checked on its own: the sinusoid layouts against the formulas as their original code writes them
(numpy, float64), position offsets and separate decoder tables, LayerNorm on the embeddings, the
decoder start token, a forced first output, suppressed tokens, q/k/v without biases and source framing.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from attnscope.model.config import BOS_ID, EOS_ID, ConfigError, ModelConfig
from attnscope.model.positions import sinusoidal_table
from attnscope.model.transformer import DecoderCache, Transformer

BASE = dict(src_vocab_size=30, tgt_vocab_size=30, d_model=16, n_heads=4, d_ff=32, n_encoder_layers=2,
            n_decoder_layers=2, dropout=0.0, attention_dropout=0.0, max_len=32)


def make(**kw) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig(**(BASE | kw))).eval()


def test_halves_layout_is_marians_table() -> None:
    """Hugging Face's MarianSinusoidalPositionalEmbedding: pos / 10000^(2(j//2)/d), sin of the even j in the
    first half, cos of the odd j in the second, in float64."""
    n, d = 50, 12
    enc = np.array([[pos / np.power(10000, 2 * (j // 2) / d) for j in range(d)] for pos in range(n)])
    expected = np.concatenate([np.sin(enc[:, 0::2]), np.cos(enc[:, 1::2])], axis=1).astype(np.float32)
    assert np.array_equal(sinusoidal_table(n, d, "halves").numpy(), expected)


def test_fairseq_layout_follows_tensor2tensor() -> None:
    """fairseq's SinusoidalPositionalEmbedding.get_embedding: frequencies exp(-i ln(10000) / (d/2 - 1))."""
    n, d = 50, 12
    freq = np.exp(np.arange(d // 2) * -(math.log(10000) / (d // 2 - 1)))
    angles = np.arange(n)[:, None] * freq[None, :]
    expected = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    assert np.abs(sinusoidal_table(n, d, "fairseq").numpy() - expected).max() < 1e-4  # float32 in its own code
    assert not np.allclose(sinusoidal_table(n, d, "halves").numpy(), expected, atol=1e-3)


@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_position_offset_reads_later_rows(positional: str) -> None:
    model = make(positional=positional, position_offset=2, sinusoid="fairseq")
    table = model.positions.table if positional == "sinusoidal" else model.positions.table.weight
    assert table.shape[0] == 32 + 2
    assert torch.equal(model.positions(5), table[2:7])
    assert torch.equal(model.positions(3, offset=4), table[6:9])


def test_separate_decoder_table_is_read_by_the_decoder_only() -> None:
    model = make(positional="learned", separate_positions=True)
    with torch.no_grad():
        model.positions.decoder_table.weight.add_(1.0)
    enc, dec = model.positions(4), model.positions(4, decoder=True)
    assert torch.equal(enc, model.positions.table.weight[:4])
    assert torch.equal(dec, model.positions.decoder_table.weight[:4])
    with pytest.raises(ConfigError, match="separate_positions needs learned"):
        ModelConfig(**(BASE | dict(separate_positions=True)))


def test_embedding_layer_norm_is_applied_to_embedding_plus_position() -> None:
    model = make(embed_norm=True, embed_scale=False, positional="learned")
    with torch.no_grad():
        model.src_embed_norm.weight.uniform_(0.5, 1.5)
    seen = []
    model.embed_dropout.register_forward_hook(lambda _m, _a, out: seen.append(out))
    src = torch.tensor([[5, 6, 7, EOS_ID]])
    with torch.no_grad():
        model.encode(src)
        raw = model.src_embed.weight[src[0]] + model.positions.table.weight[:4]
        expected = torch.nn.functional.layer_norm(raw, (16,), model.src_embed_norm.weight, model.src_embed_norm.bias)
    assert torch.allclose(seen[0][0], expected, atol=1e-6)


def test_decoder_start_token_is_what_the_first_position_reads() -> None:
    """<bos> at position 0 is read as the start token: the same logits as feeding the start token itself."""
    start = 9
    model, plain = make(decoder_start=start), make()
    plain.load_state_dict(model.state_dict())
    src = torch.tensor([[5, 6, 7, EOS_ID]])
    with torch.no_grad():
        ours = model(src, torch.tensor([[BOS_ID, 12, BOS_ID]]))  # a later <bos> is an ordinary token
        theirs = plain(src, torch.tensor([[start, 12, BOS_ID]]))
    assert torch.equal(ours, theirs)


def test_forced_first_output_is_certain_cached_or_not() -> None:
    model = make(forced_first=7)
    src, tgt = torch.tensor([[5, 6, 7, EOS_ID]]), torch.tensor([[BOS_ID, 7, 11]])
    with torch.no_grad():
        full = model(src, tgt)
        source = model.encode(src)
        cache = DecoderCache.empty(2)
        steps = torch.cat([model.decode(tgt[:, t:t + 1], source, cache).logits for t in range(3)], 1)
    assert torch.equal(full[0, 0].softmax(-1), torch.nn.functional.one_hot(torch.tensor(7), 30).float())
    assert torch.isfinite(full[0, 1:]).all()
    assert torch.allclose(steps, full, atol=1e-5)


def test_suppressed_tokens_get_minus_infinity_everywhere() -> None:
    model = make(suppressed=(0, 1))
    with torch.no_grad():
        logits = model(torch.tensor([[5, 6, EOS_ID]]), torch.tensor([[BOS_ID, 8, 9]]))
        direct = model.generator(torch.zeros(1, 16))  # code that calls the output layer itself sees them too
    assert torch.isinf(logits[..., :2]).all() and torch.isfinite(logits[..., 2:]).all()
    assert torch.isinf(direct[..., :2]).all()


def test_q_k_v_without_biases() -> None:
    model = make(qkv_bias=False)
    names = {n for n, _ in model.named_parameters()}
    assert "encoder.0.self_attn.q_proj.bias" not in names and "encoder.0.self_attn.out_proj.bias" in names
    attn = model.encoder[0].self_attn
    x = torch.randn(1, 3, 16)
    q, k, v = attn.project_qkv(x)
    assert torch.allclose(q.transpose(1, 2).reshape(1, 3, 16), x @ attn.q_proj.weight.T, atol=1e-6)
    assert model.config.parameter_count() == sum(p.numel() for p in model.parameters())


def test_source_framing_with_language_codes() -> None:
    config = ModelConfig(**(BASE | dict(source_prefix=(9,), source_suffix=(8,), source_framing="bos-eos")))
    assert config.frame_source([20, 21]) == [BOS_ID, 9, 20, 21, EOS_ID, 8]
    assert config.source_overhead == 4


def test_id_fields_round_trip_and_old_configs_get_defaults() -> None:
    config = ModelConfig(**(BASE | dict(suppressed=(1,), source_prefix=(5,), decoder_start=2, forced_first=7)))
    again = ModelConfig.from_json(config.to_json())
    assert again == config and again.suppressed == (1,)
    old = json.loads(ModelConfig(**BASE).to_json())
    for name in ("sinusoid", "position_offset", "separate_positions", "embed_norm", "qkv_bias", "decoder_start",
                 "forced_first", "suppressed", "source_prefix", "source_suffix"):
        old.pop(name)
    assert ModelConfig.from_dict(old) == ModelConfig(**BASE)


@pytest.mark.parametrize("bad, message", [
    (dict(decoder_start=30), "decoder_start holds 30"),
    (dict(suppressed=[1, "x"]), "suppressed must be a list of token ids"),
    (dict(source_prefix=(40,)), "source_prefix holds 40"),
    (dict(sinusoid="rotary"), "sinusoid must be one of"),
    (dict(activation="tanh"), "activation must be one of"),
])
def test_bad_variant_values_are_refused(bad: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**(BASE | bad))
