"""OpenNMT-py v3's transformer, written out from its published code for the tests (OpenNMT-py 3.5 pins an older
torch): checkpoints with its exact layout ({"model", "generator", "vocab", "opt", "optim"}, opt an
argparse.Namespace) and its forward pass in plain torch.

The forward follows onmt/encoders/transformer.py and onmt/decoders/transformer.py (pre-LN: `layer_norm`
then self-attention, `layer_norm_1`/`layer_norm_2` in the decoder, the feed-forward's own `layer_norm`,
final `layer_norm`s), onmt/modules/multi_headed_attn.py (query divided by sqrt(dim_per_head), -1e18 on
masked scores, a float softmax), onmt/modules/embeddings.py (embedding × sqrt(dim) + pe[:len]) and
onmt/modules/position_ffn.py. Target pads are masked in the decoder, as OpenNMT-py masks them.
Nothing here imports attnscope.
"""
from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch import Tensor

SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]  # opt.default_specials: ids 0-3
PAD = 1


def opt(**kw: object) -> argparse.Namespace:
    base = dict(model_type="text", encoder_type="transformer", decoder_type="transformer", enc_layers=2, dec_layers=2,
                hidden_size=16, enc_hid_size=16, dec_hid_size=16, word_vec_size=16, heads=4, transformer_ff=32,
                position_encoding=True, position_encoding_type="SinusoidalInterleaved", max_relative_positions=0,
                layer_norm="standard", norm_eps=1e-6, pos_ffn_activation_fn="relu", add_qkvbias=False, add_ffnbias=True,
                num_kv=0, parallel_residual=False, self_attn_type="scaled-dot", share_decoder_embeddings=False,
                share_embeddings=False, dropout=[0.1], attention_dropout=[0.1], default_specials=list(SPECIALS))
    return argparse.Namespace(**(base | kw))


def pe_table(n: int, d: int, kind: str) -> Tensor:
    """PositionalEncoding's pe buffer, (n, 1, d) as OpenNMT-py keeps it."""
    if kind == "SinusoidalInterleaved":
        pe = torch.zeros(n, d)
        position = torch.arange(0, n).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float) * -(math.log(10000.0) / d))
        pe[:, 0::2] = torch.sin(position.float() * div_term)
        pe[:, 1::2] = torch.cos(position.float() * div_term)
    else:
        half = d // 2
        step = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
        pe = torch.arange(n, dtype=torch.float).unsqueeze(1) * step.unsqueeze(0)
        pe = torch.cat([torch.sin(pe), torch.cos(pe)], dim=1)
    return pe.unsqueeze(1)


def checkpoint(o: argparse.Namespace, src_vocab: list[str], tgt_vocab: list[str], seed: int = 0) -> dict:
    """An OpenNMT-py v3 checkpoint dict with random weights."""
    g = torch.Generator().manual_seed(seed)
    d, f = o.hidden_size, o.transformer_ff
    model: dict[str, Tensor] = {}

    def rand(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=g) * 0.5

    def linear(name: str, n_out: int, n_in: int, bias: bool) -> None:
        model[f"{name}.weight"] = rand(n_out, n_in)
        if bias:
            model[f"{name}.bias"] = rand(n_out)

    def norm(name: str) -> None:
        model[f"{name}.weight"], model[f"{name}.bias"] = 1 + rand(d) * 0.2, rand(d) * 0.2

    def attention(name: str) -> None:
        for proj in ("linear_keys", "linear_values", "linear_query", "final_linear"):
            linear(f"{name}.{proj}", d, d, o.add_qkvbias)

    def ffn(name: str) -> None:
        linear(f"{name}.w_1", f, d, o.add_ffnbias)
        linear(f"{name}.w_2", d, f, o.add_ffnbias)
        norm(f"{name}.layer_norm")

    for side, vocab in (("encoder", src_vocab), ("decoder", tgt_vocab)):
        model[f"{side}.embeddings.make_embedding.emb_luts.0.weight"] = rand(len(vocab), d)
        model[f"{side}.embeddings.make_embedding.pe.pe"] = pe_table(128, d, o.position_encoding_type)
        norm(f"{side}.layer_norm")
    for i in range(o.enc_layers):
        attention(f"encoder.transformer.{i}.self_attn")
        norm(f"encoder.transformer.{i}.layer_norm")
        ffn(f"encoder.transformer.{i}.feed_forward")
    for i in range(o.dec_layers):
        for attn in ("self_attn", "context_attn"):
            attention(f"decoder.transformer_layers.{i}.{attn}")
        norm(f"decoder.transformer_layers.{i}.layer_norm_1")
        norm(f"decoder.transformer_layers.{i}.layer_norm_2")
        ffn(f"decoder.transformer_layers.{i}.feed_forward")
    tied = model["decoder.embeddings.make_embedding.emb_luts.0.weight"]
    weight = tied if o.share_decoder_embeddings else rand(len(tgt_vocab), d)
    generator = {"weight": weight, "bias": rand(len(tgt_vocab))}
    vocab = {"src": src_vocab, "tgt": tgt_vocab, "data_task": "seq2seq", "decoder_start_token": "<s>"}
    return {"model": model, "generator": generator, "vocab": vocab, "opt": o,
            "optim": {"optimizer": {"state": {}, "param_groups": [{"lr": 2.0}]}, "training_step": 100}}


def forward(ck: dict, src: Tensor, tgt: Tensor) -> tuple[Tensor, dict[str, list[Tensor]]]:
    """Logits (B, T, V) of the generator (before its log-softmax) and every layer's attention weights per head."""
    s, o = ck["model"], ck["opt"]
    heads, d = o.heads, o.hidden_size
    act = F.relu if o.pos_ffn_activation_fn == "relu" else F.gelu
    weights: dict[str, list[Tensor]] = {"encoder": [], "decoder": [], "cross": []}

    def lin(name: str, x: Tensor) -> Tensor:
        return F.linear(x, s[f"{name}.weight"], s.get(f"{name}.bias"))

    def ln(name: str, x: Tensor) -> Tensor:
        return F.layer_norm(x, (d,), s[f"{name}.weight"], s[f"{name}.bias"], o.norm_eps)

    def mha(kind: str, name: str, query: Tensor, memory: Tensor, mask: Tensor) -> Tensor:
        b = query.shape[0]

        def shape(x: Tensor) -> Tensor:
            return x.view(b, -1, heads, d // heads).transpose(1, 2)  # (B, H, N, dh)

        k, v, q = shape(lin(f"{name}.linear_keys", memory)), shape(lin(f"{name}.linear_values", memory)), shape(
            lin(f"{name}.linear_query", query))
        q = q / math.sqrt(d // heads)
        scores = torch.matmul(q, k.transpose(2, 3)).float().masked_fill(mask.unsqueeze(1), -1e18)
        attn = scores.softmax(-1)
        weights[kind].append(attn)
        context = torch.matmul(attn, v).transpose(1, 2).reshape(b, -1, d)
        return lin(f"{name}.final_linear", context)

    def ffn(name: str, x: Tensor) -> Tensor:
        return lin(f"{name}.w_2", act(lin(f"{name}.w_1", ln(f"{name}.layer_norm", x)))) + x

    def embed(side: str, ids: Tensor) -> Tensor:
        pe = s[f"{side}.embeddings.make_embedding.pe.pe"].transpose(0, 1)
        return s[f"{side}.embeddings.make_embedding.emb_luts.0.weight"][ids] * math.sqrt(d) + pe[:, : ids.shape[1]]

    src_mask = src.eq(PAD).unsqueeze(1)  # (B, 1, S): True where padded
    x = embed("encoder", src)
    for i in range(o.enc_layers):
        p = f"encoder.transformer.{i}"
        h = ln(f"{p}.layer_norm", x)
        x = ffn(f"{p}.feed_forward", mha("encoder", f"{p}.self_attn", h, h, src_mask) + x)
    memory = ln("encoder.layer_norm", x)
    t = tgt.shape[1]
    future = torch.triu(torch.ones(t, t, dtype=torch.bool), 1).unsqueeze(0)
    dec_mask = tgt.eq(PAD).unsqueeze(1) | future  # (B, T, T)
    y = embed("decoder", tgt)
    for i in range(o.dec_layers):
        p = f"decoder.transformer_layers.{i}"
        h = ln(f"{p}.layer_norm_1", y)
        query = mha("decoder", f"{p}.self_attn", h, h, dec_mask) + y
        h = ln(f"{p}.layer_norm_2", query)
        y = ffn(f"{p}.feed_forward", mha("cross", f"{p}.context_attn", h, memory, src_mask) + query)
    y = ln("decoder.layer_norm", y)
    return F.linear(y, ck["generator"]["weight"], ck["generator"]["bias"]), weights
