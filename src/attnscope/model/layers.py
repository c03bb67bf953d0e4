"""The layers of the encoder-decoder Transformer (Vaswani et al. 2017, fig. 1) and the stacks that hold them.

An encoder layer is self-attention then the feed-forward network, each inside a residual block; a decoder layer
has masked self-attention, cross-attention over the encoder's output, then the feed-forward network. With a
`LayerCache`, a decoder layer keeps the keys and values it has seen (incremental decoding). Each layer and each
stack has hook points (hooks.py): a layer the stream entering and leaving it, a stack its embedded input and its output.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch
from torch import Tensor, nn

from attnscope.model.attention import MultiHeadAttention
from attnscope.model.blocks import Residual, feed_forward
from attnscope.model.config import ModelConfig
from attnscope.model.hooks import LAYER, RESID_POST, RESID_PRE, HookPoints
from attnscope.model.kinds import Kind
from attnscope.model.positions import RelativePositionBias


@dataclass
class LayerCache:
    """Keys/values one decoder layer has seen: its own past (grows) and the source (fixed).

    The past lives in buffers written in place, each step's keys after the earlier ones, that double when full;
    `self_k`/`self_v` view their filled part. Joining the past and the new keys with torch.cat would copy the whole
    past at every step: quadratic in the output's length, ~4% of a 400-token decode on opus-mt's shape."""

    self_k: Tensor | None = None  # (B, H, t, dh): a view of the first t positions of the buffer
    self_v: Tensor | None = None
    cross_k: Tensor | None = None  # (B, H, S, dh)
    cross_v: Tensor | None = None
    qkv_weights: tuple[Tensor, Tensor] | None = None  # self-attention's packed projection, made at the first step (if packed)
    buffers: tuple[Tensor, Tensor] | None = None  # (B, H, capacity, dh) each: where self_k and self_v live

    def extend(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """The keys and values of every position so far: the past ones, then `k` and `v` (B, H, n, dh). Where
        autograd records (attribution's gradients through incremental decoding), joined out of place instead: a
        write into the buffer would change tensors the backward still needs."""
        if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (k, v, self.self_k)):
            self.buffers = None
            self.self_k, self.self_v = (k, v) if self.self_k is None else (torch.cat([self.self_k, k], 2),
                                                                           torch.cat([self.self_v, v], 2))
            return self.self_k, self.self_v
        t = 0 if self.self_k is None else self.self_k.shape[2]
        end = t + k.shape[2]
        if self.buffers is None or self.buffers[0].shape[2] < end:
            grown = tuple(x.new_empty(*x.shape[:2], max(2 * end, 16), x.shape[3]) for x in (k, v))
            if self.self_k is not None:
                grown[0][:, :, :t], grown[1][:, :, :t] = self.self_k, self.self_v
            self.buffers = grown
        keys, values = self.buffers
        keys[:, :, t:end], values[:, :, t:end] = k, v
        self.self_k, self.self_v = keys[:, :, :end], values[:, :, :end]
        return self.self_k, self.self_v

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search reorders and prunes hypotheses)."""
        if self.buffers is not None:
            t = self.self_k.shape[2]
            self.buffers = tuple(b.index_select(0, index) for b in self.buffers)
            self.self_k, self.self_v = self.buffers[0][:, :, :t], self.buffers[1][:, :, :t]
        if self.cross_k is not None:
            self.cross_k, self.cross_v = self.cross_k.index_select(0, index), self.cross_v.index_select(0, index)


def attention(c: ModelConfig, kind: Kind) -> MultiHeadAttention:
    return MultiHeadAttention(d_model=c.d_model, n_heads=c.n_heads, dropout=c.attention_dropout, kind=kind,
                              qkv_bias=c.qkv_bias, out_bias=c.out_bias, scale_scores=c.scale_scores, head_dim=c.d_head)


def relative_bias(c: ModelConfig, first: bool, bidirectional: bool) -> RelativePositionBias | None:
    """T5 keeps its stack's relative position table in the first layer; every layer adds the bias made from it."""
    return RelativePositionBias(c, bidirectional) if first and c.positional == "relative" else None


class EncoderLayer(nn.Module):
    def __init__(self, c: ModelConfig, first: bool = False) -> None:
        super().__init__()
        self.self_attn = attention(c, "encoder")
        self.relative_bias = relative_bias(c, first, bidirectional=True)
        self.ffn = feed_forward(c)
        self.attn_block, self.ffn_block = Residual(c), Residual(c)
        self.hooks = HookPoints(LAYER)

    def attention_blocks(self) -> tuple[tuple[MultiHeadAttention, Residual], ...]:
        """The layer's attention with the residual block around it."""
        return ((self.self_attn, self.attn_block),)

    def forward(self, x: Tensor, mask: Tensor | None, need_weights: bool = False,
                bias: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """The layer's output (B, S, D) and, when asked, its self-attention weights (B, H, S, S); `bias` (1, H, S, S)
        is the stack's relative position bias (T5)."""
        weights = None

        def attend(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.self_attn(*self.self_attn.project_qkv(h), mask, need_weights, bias)
            return out
        x = self.attn_block(self.hooks.at(RESID_PRE, x), attend)
        return self.hooks.at(RESID_POST, self.ffn_block(x, self.ffn)), weights


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig, first: bool = False) -> None:
        super().__init__()
        self.self_attn, self.cross_attn = attention(c, "decoder"), attention(c, "cross")
        self.relative_bias = relative_bias(c, first, bidirectional=False)  # cross-attention has none
        self.ffn = feed_forward(c)
        self.self_block, self.cross_block, self.ffn_block = (Residual(c) for _ in range(3))
        self.hooks = HookPoints(LAYER)

    def attention_blocks(self) -> tuple[tuple[MultiHeadAttention, Residual], ...]:
        """The layer's masked self-attention and cross-attention, each with the residual block around it."""
        return (self.self_attn, self.self_block), (self.cross_attn, self.cross_block)

    def _self(self, h: Tensor, cache: LayerCache | None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of masked self-attention: with a cache, the keys of every earlier position too."""
        if cache is None:
            return self.self_attn.project_qkv(h)
        cache.qkv_weights = cache.qkv_weights or self.self_attn.qkv_weights()
        q, k, v = self.self_attn.project_qkv(h, cache.qkv_weights)
        return q, *cache.extend(k, v)

    def _cross(self, h: Tensor, memory: Tensor, cache: LayerCache | None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries of cross-attention and the source's keys and values (with a cache, computed once a sentence)."""
        if cache is not None and cache.cross_k is not None:
            k, v = cache.cross_k, cache.cross_v
        else:
            k, v = self.cross_attn.project_kv(memory)
            if cache is not None:  # strided views of one packed projection: contiguous once, read every step
                k, v = k.contiguous(), v.contiguous()
                cache.cross_k, cache.cross_v = k, v
        return self.cross_attn.project_q(h), k, v

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None, cross_mask: Tensor | None,
                cache: LayerCache | None = None, need_weights: bool = False, bias: Tensor | None = None
                ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """The layer's output (B, T, D) and, when asked, its masked self- and cross-attention weights; `bias`
        (1, H, T, K) is the stack's relative position bias for the masked self-attention (T5)."""
        self_weights = cross_weights = None

        def attend_self(h: Tensor) -> Tensor:
            nonlocal self_weights
            out, self_weights = self.self_attn(*self._self(h, cache), self_mask, need_weights, bias)
            return out

        def attend_source(h: Tensor) -> Tensor:
            nonlocal cross_weights
            out, cross_weights = self.cross_attn(*self._cross(h, memory, cache), cross_mask, need_weights)
            return out
        x = self.self_block(self.hooks.at(RESID_PRE, x), attend_self)
        x = self.cross_block(x, attend_source)
        return self.hooks.at(RESID_POST, self.ffn_block(x, self.ffn)), self_weights, cross_weights


class Stack(nn.ModuleList):
    """The encoder's or the decoder's layers in order, with the stack's hook points (`hooks`: the table's ENCODER or
    DECODER rows, its embedded input and its output)."""

    def __init__(self, layers: Iterable[nn.Module], site: str) -> None:
        super().__init__(layers)
        self.hooks = HookPoints(site)
