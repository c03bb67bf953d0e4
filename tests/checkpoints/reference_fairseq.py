"""fairseq's transformer, written out from its published code for the tests (fairseq does not install beside
torch 2.13): checkpoints with its exact key layout and settings, and its forward pass in plain torch.

The forward follows fairseq/models/transformer/transformer_{encoder,decoder}.py, modules/transformer_layer.py,
modules/multihead_attention.py (q scaled by head_dim^-0.5 before q·k, -inf on padded keys and future
positions), modules/sinusoidal_positional_embedding.py and utils.make_positions (positions count from
padding_idx + 1, padding rows read the zero row), embeddings scaled by sqrt(d) unless no_scale_embedding.
Nothing here imports attnscope.
"""
from __future__ import annotations

import argparse
import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

PAD = 1


def args(**kw: object) -> argparse.Namespace:
    """A fairseq transformer's args (base_architecture's names), tiny."""
    base = dict(arch="transformer", encoder_embed_dim=16, decoder_embed_dim=16, encoder_ffn_embed_dim=32,
                decoder_ffn_embed_dim=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_normalize_before=False, decoder_normalize_before=False,
                encoder_learned_pos=False, decoder_learned_pos=False, activation_fn="relu", dropout=0.1,
                share_decoder_input_output_embed=True, share_all_embeddings=False, no_scale_embedding=False,
                layernorm_embedding=False, max_source_positions=64, max_target_positions=64, source_lang="en",
                target_lang="de", bpe=None, adaptive_softmax_cutoff=None, no_token_positional_embeddings=False)
    return argparse.Namespace(**(base | kw))


def state(a: argparse.Namespace, src_rows: int, tgt_rows: int, seed: int = 0) -> dict[str, Tensor]:
    """Random weights under fairseq's TransformerModel state_dict keys."""
    g = torch.Generator().manual_seed(seed)
    d, f = a.encoder_embed_dim, a.encoder_ffn_embed_dim
    out: dict[str, Tensor] = {}

    def rand(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=g) * 0.5

    def linear(name: str, n_out: int, n_in: int) -> None:
        out[f"{name}.weight"], out[f"{name}.bias"] = rand(n_out, n_in), rand(n_out)

    def norm(name: str) -> None:
        out[f"{name}.weight"], out[f"{name}.bias"] = 1 + rand(d) * 0.2, rand(d) * 0.2

    for side, rows, layers in (("encoder", src_rows, a.encoder_layers), ("decoder", tgt_rows, a.decoder_layers)):
        out[f"{side}.embed_tokens.weight"] = rand(rows, d)
        if getattr(a, f"{side}_learned_pos"):
            longest = a.max_source_positions if side == "encoder" else a.max_target_positions
            out[f"{side}.embed_positions.weight"] = rand(longest + PAD + 1, d)
        else:
            out[f"{side}.embed_positions._float_tensor"] = torch.zeros(1)  # the old sinusoid's dummy buffer
        for i in range(layers):
            attentions = ("self_attn", "encoder_attn") if side == "decoder" else ("self_attn",)
            for attn in attentions:
                for proj in ("k_proj", "v_proj", "q_proj", "out_proj"):
                    linear(f"{side}.layers.{i}.{attn}.{proj}", d, d)
                norm(f"{side}.layers.{i}.{attn}_layer_norm")
            linear(f"{side}.layers.{i}.fc1", f, d)
            linear(f"{side}.layers.{i}.fc2", d, f)
            norm(f"{side}.layers.{i}.final_layer_norm")
        if getattr(a, f"{side}_normalize_before"):
            norm(f"{side}.layer_norm")
        if a.layernorm_embedding:
            norm(f"{side}.layernorm_embedding")
        out[f"{side}.version"] = torch.tensor([3.0])
    out["decoder.output_projection.weight"] = (out["decoder.embed_tokens.weight"] if a.share_decoder_input_output_embed
                                              else rand(tgt_rows, d))
    return out


def sinusoid(n: int, d: int) -> Tensor:
    half = d // 2
    emb = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000) / (half - 1)))
    emb = torch.arange(n, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
    emb[PAD, :] = 0
    return emb


def positions(s: dict[str, Tensor], a: argparse.Namespace, side: str, tokens: Tensor) -> Tensor:
    mask = tokens.ne(PAD).int()
    pos = (torch.cumsum(mask, dim=1) * mask).long() + PAD  # utils.make_positions
    if getattr(a, f"{side}_learned_pos"):
        return s[f"{side}.embed_positions.weight"][pos]
    return sinusoid(int(pos.max()) + 1, a.encoder_embed_dim)[pos]


def attention(s: dict[str, Tensor], p: str, query: Tensor, key: Tensor, heads: int, key_padding: Tensor | None,
              causal: bool) -> tuple[Tensor, Tensor]:
    b, t, d = query.shape
    dh = d // heads
    q = F.linear(query, s[f"{p}.q_proj.weight"], s[f"{p}.q_proj.bias"]) * dh ** -0.5
    k = F.linear(key, s[f"{p}.k_proj.weight"], s[f"{p}.k_proj.bias"])
    v = F.linear(key, s[f"{p}.v_proj.weight"], s[f"{p}.v_proj.bias"])

    def split(x: Tensor) -> Tensor:
        return x.view(b, -1, heads, dh).transpose(1, 2)  # (B, H, N, dh)

    scores = split(q) @ split(k).transpose(-1, -2)  # (B, H, T, S)
    if causal:
        scores = scores + torch.triu(torch.full((t, t), float("-inf")), 1)
    if key_padding is not None:
        scores = scores.masked_fill(key_padding[:, None, None, :], float("-inf"))
    weights = scores.float().softmax(-1)
    out = (weights @ split(v)).transpose(1, 2).reshape(b, t, d)
    return F.linear(out, s[f"{p}.out_proj.weight"], s[f"{p}.out_proj.bias"]), weights


def _ln(s: dict[str, Tensor], name: str, x: Tensor) -> Tensor:
    return F.layer_norm(x, x.shape[-1:], s[f"{name}.weight"], s[f"{name}.bias"], 1e-5)


def _block(s: dict[str, Tensor], norm: str, x: Tensor, pre: bool, fn: Callable[[Tensor], Tensor]) -> Tensor:
    residual = x
    x = fn(_ln(s, norm, x) if pre else x)
    x = residual + x
    return x if pre else _ln(s, norm, x)


def forward(s: dict[str, Tensor], a: argparse.Namespace, src: Tensor, prev: Tensor) -> tuple[Tensor, dict[str, list[Tensor]]]:
    """Logits (B, T, V) and every layer's attention weights per head, in fairseq's ids."""
    act = F.relu if a.activation_fn == "relu" else F.gelu
    scale = 1.0 if a.no_scale_embedding else math.sqrt(a.encoder_embed_dim)
    weights: dict[str, list[Tensor]] = {"encoder": [], "decoder": [], "cross": []}
    src_pad = src.eq(PAD)

    def embed(side: str, tokens: Tensor) -> Tensor:
        x = scale * s[f"{side}.embed_tokens.weight"][tokens] + positions(s, a, side, tokens)
        return _ln(s, f"{side}.layernorm_embedding", x) if a.layernorm_embedding else x

    def ffn(p: str, x: Tensor) -> Tensor:
        return F.linear(act(F.linear(x, s[f"{p}.fc1.weight"], s[f"{p}.fc1.bias"])), s[f"{p}.fc2.weight"], s[f"{p}.fc2.bias"])

    def attend(kind: str, p: str, keys: Tensor | None, pad: Tensor | None, causal: bool,
               heads: int) -> Callable[[Tensor], Tensor]:
        def run(x: Tensor) -> Tensor:
            out, w = attention(s, p, x, x if keys is None else keys, heads, pad, causal)
            weights[kind].append(w)
            return out
        return run

    x = embed("encoder", src)
    pre = a.encoder_normalize_before
    for i in range(a.encoder_layers):
        p = f"encoder.layers.{i}"
        x = _block(s, f"{p}.self_attn_layer_norm", x, pre, attend("encoder", f"{p}.self_attn", None, src_pad, False,
                                                                   a.encoder_attention_heads))
        x = _block(s, f"{p}.final_layer_norm", x, pre, lambda h, p=p: ffn(p, h))
    memory = _ln(s, "encoder.layer_norm", x) if pre else x
    y = embed("decoder", prev)
    for i in range(a.decoder_layers):
        p = f"decoder.layers.{i}"
        y = _block(s, f"{p}.self_attn_layer_norm", y, pre, attend("decoder", f"{p}.self_attn", None, None, True,
                                                                   a.decoder_attention_heads))
        y = _block(s, f"{p}.encoder_attn_layer_norm", y, pre, attend("cross", f"{p}.encoder_attn", memory, src_pad, False,
                                                                      a.decoder_attention_heads))
        y = _block(s, f"{p}.final_layer_norm", y, pre, lambda h, p=p: ffn(p, h))
    if pre:
        y = _ln(s, "decoder.layer_norm", y)
    return F.linear(y, s["decoder.output_projection.weight"]), weights
