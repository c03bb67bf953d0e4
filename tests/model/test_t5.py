"""T5 as attnscope's Transformer computes it, against transformers' own T5ForConditionalGeneration (eager attention).

Tiny T5s of both kinds are built from configs, their weights copied into attnscope's model under the names below
(the importer comes later), and each forward compared: T5 v1.0 (ReLU feed-forward network, output layer tied to the
embedding and its input rescaled by d_model^-0.5) and v1.1 / Flan-T5 / mT5 (gated GELU, untied, heads that do not
add up to d_model, as in their small sizes). Few buckets and a short max distance make longer offsets share buckets.
"""
from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch
from torch import nn

from attnscope.model.config import BOS_ID, ConfigError, ModelConfig
from attnscope.model.positions import relative_bucket
from attnscope.model.transformer import DecoderCache, Transformer

transformers = pytest.importorskip("transformers")

VOCAB, PAD, EOS = 40, 0, 1  # T5's own ids: <pad> (also the decoder's start) and </s>
SIZES = dict(d_model=16, num_heads=4, d_ff=24, num_layers=2, num_decoder_layers=3, relative_attention_num_buckets=8,
             relative_attention_max_distance=6)
VERSIONS = {"v1.0": dict(feed_forward_proj="relu", tie_word_embeddings=True, d_kv=4),
            "v1.1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False, d_kv=6)}
# transformers' names -> attnscope's: each stack's blocks, the sublayers in them, their projections
NAMES = [
    (r"^shared\.", "tgt_embed."), (r"^lm_head\.", "generator."), (r"^(encoder|decoder)\.final_layer_norm\.", r"\1_norm."),
    (r"^(encoder|decoder)\.block\.0\.layer\.0\.SelfAttention\.relative_attention_bias\.", r"\1.0.relative_bias.table."),
    (r"^encoder\.block\.(\d+)\.layer\.0\.", r"encoder.\1.attn."), (r"^encoder\.block\.(\d+)\.layer\.1\.", r"encoder.\1.ffn."),
    (r"^decoder\.block\.(\d+)\.layer\.0\.", r"decoder.\1.self."), (r"^decoder\.block\.(\d+)\.layer\.1\.", r"decoder.\1.cross."),
    (r"^decoder\.block\.(\d+)\.layer\.2\.", r"decoder.\1.ffn."),
    (r"\.(attn|self|cross|ffn)\.layer_norm\.", r".\1_block.norm."), (r"\.attn\.SelfAttention\.", ".self_attn."),
    (r"\.self\.SelfAttention\.", ".self_attn."), (r"\.cross\.EncDecAttention\.", ".cross_attn."),
    (r"_attn\.([qkv])\.", r"_attn.\1_proj."), (r"_attn\.o\.", "_attn.out_proj."),
    (r"\.ffn\.DenseReluDense\.wi\.", ".ffn.up."), (r"\.ffn\.DenseReluDense\.wi_0\.", ".ffn.gate."),
    (r"\.ffn\.DenseReluDense\.wi_1\.", ".ffn.up."), (r"\.ffn\.DenseReluDense\.wo\.", ".ffn.down."),
]


def hf_t5(version: str, seed: int = 0) -> nn.Module:
    """A random T5 of `version` whose norms and position biases are far from their initial values."""
    torch.manual_seed(seed)
    config = transformers.T5Config(vocab_size=VOCAB, dropout_rate=0.0, pad_token_id=PAD, eos_token_id=EOS,
                                   decoder_start_token_id=PAD, attn_implementation="eager", **SIZES, **VERSIONS[version])
    model = transformers.T5ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.uniform_(0.5, 1.5)
            elif "relative_attention_bias" in name:
                p.normal_(0.0, 2.0)
        if version == "v1.1":  # transformers ties lm_head to the embedding whatever the config says: untie it
            model.lm_head.weight = nn.Parameter(torch.randn(VOCAB, SIZES["d_model"]) * SIZES["d_model"] ** -0.5)
    return model


def attnscope_config(version: str, **extra) -> ModelConfig:
    v1 = version == "v1.0"
    return ModelConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=SIZES["d_model"], n_heads=SIZES["num_heads"],
                       d_head=VERSIONS[version]["d_kv"], d_ff=SIZES["d_ff"], n_encoder_layers=SIZES["num_layers"],
                       n_decoder_layers=SIZES["num_decoder_layers"], dropout=0.0, attention_dropout=0.0, max_len=64,
                       positional="relative", relative_buckets=SIZES["relative_attention_num_buckets"],
                       relative_max_distance=SIZES["relative_attention_max_distance"], norm="pre", layer_norm="rms",
                       norm_eps=1e-6, ffn="dense" if v1 else "gated", activation="relu" if v1 else "gelu_tanh",
                       qkv_bias=False, out_bias=False, ffn_bias=False, scale_scores=False, scale_output=v1,
                       embed_scale=False, share_embeddings=True, tie_embeddings=v1, decoder_start=PAD, **extra)


def converted(hf: nn.Module, version: str, **extra) -> Transformer:
    """attnscope's model holding `hf`'s weights (and a zero output bias, which T5 lacks)."""
    model = Transformer(attnscope_config(version, **extra), initialise=False).eval()
    state = {}
    for name, tensor in hf.state_dict().items():
        if name.startswith(("encoder.embed_tokens", "decoder.embed_tokens")):
            continue  # the shared table again
        for pattern, replacement in NAMES:
            name = re.sub(pattern, replacement, name)
        state[name] = tensor
    state["generator.bias"] = torch.zeros(VOCAB)
    if version == "v1.0":
        state["generator.weight"] = state["tgt_embed.weight"]
    state["src_embed.weight"] = state["tgt_embed.weight"]
    model.load_state_dict(state, strict=True)
    return model


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Two sources (the second padded) and target ids, none of them <pad>: long enough to saturate the buckets."""
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(2, VOCAB, (2, 13), generator=g), torch.randint(2, VOCAB, (2, 11), generator=g)
    src[1, 9:] = PAD
    return src, tgt


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("buckets, distance", [(32, 128), (8, 6), (6, 4), (7, 20)])
def test_buckets_are_t5s(bidirectional: bool, buckets: int, distance: int) -> None:
    offsets = torch.arange(-300, 301)
    ours = relative_bucket(offsets, buckets, distance, bidirectional)
    theirs = transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket(
        offsets, bidirectional=bidirectional, num_buckets=buckets, max_distance=distance)
    assert torch.equal(ours, theirs)
    assert ours[offsets == 0].item() == 0 and ours.max() == (2 * (buckets // 2) - 1 if bidirectional else buckets - 1)


def test_bucket_edges_by_hand() -> None:
    """The decoder's 8 buckets: distances 0-3 exact, then 4 + floor(log(d / 4) / log(6 / 4) * 4): 4 -> 4, 5 -> 6,
    6 and farther -> 7."""
    distance = torch.arange(0, 10)
    assert relative_bucket(-distance, 8, 6, False).tolist() == [0, 1, 2, 3, 4, 6, 7, 7, 7, 7]
    assert relative_bucket(distance, 8, 6, False).tolist() == [0] * 10  # later keys: distance 0
    # the encoder's: 4 buckets a direction, distances 0, 1 exact; keys after the query in buckets 4..7
    assert relative_bucket(distance, 8, 6, True).tolist() == [0, 5, 6, 6, 7, 7, 7, 7, 7, 7]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_weight_and_log_prob_is_transformers(version: str) -> None:
    hf = hf_t5(version)
    model = converted(hf, version)
    src, tgt = batch()
    decoder_inputs = torch.cat([torch.full((2, 1), BOS_ID), tgt[:, 1:]], 1)  # <bos> reads decoder_start's embedding
    with torch.no_grad():
        theirs = hf(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=torch.cat(
            [torch.full((2, 1), PAD), tgt[:, 1:]], 1), output_attentions=True)
        source = model.encode(src, output_attentions=True)
        ours = model.decode(decoder_inputs, source, output_attentions=True)
        fused = model(src, decoder_inputs)  # the fused kernel, the bias in its float mask
    pairs = [*zip(source.attentions, theirs.encoder_attentions), *zip(ours.self_attentions, theirs.decoder_attentions),
             *zip(ours.cross_attentions, theirs.cross_attentions)]
    assert len(pairs) == 2 + 3 + 3
    for mine, reference in pairs:
        assert mine.shape == reference.shape and (mine - reference).abs().max() < 1e-5
    for logits in (ours.logits, fused):
        assert (logits.log_softmax(-1) - theirs.logits.log_softmax(-1)).abs().max() < 1e-4
    assert model.config.parameter_count() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("version, seed", [("v1.0", 0), ("v1.1", 0), ("v1.1", 2)])  # v1.1 seed 0 stops at </s>
def test_greedy_with_the_cache_is_transformers_generate(version: str, seed: int) -> None:
    """A random T5 says <pad> over and over, which a trained one never does: both leave it out. (Random tied v1.0
    models mostly repeat one token; these seeds give at least three different ones.)"""
    hf = hf_t5(version, seed)
    model = converted(hf, version, suppressed=(PAD,))
    src = batch(seed + 5)[0][:1]
    with torch.no_grad():
        cache = transformers.EncoderDecoderCache(transformers.DynamicCache(), transformers.DynamicCache())  # one sized
        #   by the config would have num_layers (2) decoder layers, not num_decoder_layers (3)
        theirs = hf.generate(src, max_new_tokens=16, do_sample=False, num_beams=1, past_key_values=cache,
                             suppress_tokens=[PAD])[0, 1:].tolist()
        source, cache, tokens = model.encode(src), DecoderCache.empty(len(model.decoder)), [BOS_ID]
        while len(tokens) <= 16 and (len(tokens) == 1 or tokens[-1] != EOS):
            tokens.append(int(model.next_logits(torch.tensor([tokens[-1:]]), source, cache).argmax(-1)))
    assert tokens[1:] == theirs and len(set(theirs)) >= 3


@pytest.mark.parametrize("version", VERSIONS)
def test_cached_decoding_is_the_full_pass(version: str) -> None:
    """Step t reads the bias row of query t over keys 0..t: every weight and logit as one teacher-forced pass."""
    model = converted(hf_t5(version), version)
    src, tgt = batch()
    with torch.no_grad():
        source = model.encode(src)
        full = model.decode(tgt, source, output_attentions=True)
        cache = DecoderCache.empty(len(model.decoder))
        steps = [model.decode(tgt[:, t:t + 1], source, cache, output_attentions=True) for t in range(tgt.shape[1])]
    assert (torch.cat([s.logits for s in steps], 1) - full.logits).abs().max() < 1e-5
    for layer in range(len(model.decoder)):
        for t, step in enumerate(steps):
            assert (step.self_attentions[layer][:, :, 0] - full.self_attentions[layer][:, :, t, :t + 1]).abs().max() < 1e-6
            assert (step.cross_attentions[layer][:, :, 0] - full.cross_attentions[layer][:, :, t]).abs().max() < 1e-6


def test_the_bias_is_shared_and_moves_the_weights() -> None:
    """One table per stack, in its first layer; zeroing it changes every layer's weights (it is really added)."""
    model = converted(hf_t5("v1.0"), "v1.0")
    tables = [name for name, _ in model.named_parameters() if "relative_bias" in name]
    assert tables == ["encoder.0.relative_bias.table.weight", "decoder.0.relative_bias.table.weight"]
    src, _ = batch()
    with torch.no_grad():
        before = model.encode(src, output_attentions=True).attentions
        model.encoder[0].relative_bias.table.weight.zero_()
        after = model.encode(src, output_attentions=True).attentions
    assert all((a - b).abs().max() > 1e-3 for a, b in zip(before, after))


def test_a_decoder_starting_on_pad_trains_its_row() -> None:
    """T5's decoder reads <pad>'s embedding first, so fine-tuning must move it; elsewhere <pad>'s row learns nothing."""
    src, tgt = batch()
    for config, learns in ((attnscope_config("v1.1"), True), (replace(attnscope_config("v1.1"), decoder_start=None), False)):
        model = Transformer(config).train()
        model(src, tgt).logsumexp(-1).sum().backward()
        assert (model.tgt_embed.weight.grad[PAD].abs().sum() > 0) == learns


def test_rms_norm_is_t5s() -> None:
    """Zhang & Sennrich's RMSNorm as T5LayerNorm computes it, in float16 too (its mean of squares in float32)."""
    from attnscope.model.blocks import RMSNorm
    norm, theirs = RMSNorm(16, 1e-6), transformers.models.t5.modeling_t5.T5LayerNorm(16, 1e-6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        theirs.weight.copy_(norm.weight)
    x = torch.randn(3, 16) * 300
    with torch.no_grad():
        assert torch.allclose(norm(x), norm.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), rtol=1e-6)
        assert torch.equal(norm(x), theirs(x)) and not hasattr(norm, "bias")
        assert torch.equal(norm.half()(x.half()), theirs.half()(x.half())) and torch.isfinite(norm(x.half())).all()
        x, norm = x.double(), norm.double()  # value zeroing's float64 copy keeps float64's precision
        assert torch.allclose(norm(x), norm.weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), rtol=1e-12)


@pytest.mark.parametrize("bad, message", [
    (dict(positional="relative", relative_buckets=3), "relative_buckets must be between 4 and 1024"),
    (dict(relative_buckets=16, relative_max_distance=8), "relative_max_distance must be more than the 8 exact"),
    (dict(d_head=0), "d_head must be a positive integer"),
    (dict(ffn="glu"), "ffn must be one of dense, gated"),
    (dict(layer_norm="scale"), "layer_norm must be one of torch, annotated, rms"),
    (dict(positional="rope"), "positional must be 'sinusoidal', 'learned' or 'relative'"),
])
def test_bad_t5_values_are_refused(bad: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelConfig(**(dict(src_vocab_size=30, tgt_vocab_size=30) | bad))
