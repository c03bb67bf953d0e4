"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017, fig. 1).

Read top to bottom: the KV cache, what the encoder and decoder return, their layers, then the model. Attention is
attention.py; the feed-forward network, LayerNorm, the residual block and the output layer are blocks.py;
positions are positions.py.
Asked with `output_attentions=True`, `encode` and `decode` return every head's weights beside their result
(as Hugging Face models do): exactly the tensors the model went on with, per layer (B, H, Q, K).

The variants that models trained elsewhere need (Hugging Face Marian, BART, mBART, M2M100/NLLB, fairseq,
OpenNMT-py) are config fields whose defaults are the paper's model: other sinusoid layouts and position
offsets, a separate decoder position table, LayerNorm on the embeddings, q/k/v without biases, a decoder
start token other than <bos>, a forced first output (a language code) and tokens never output; and T5's
(Raffel et al. 2020): relative position biases instead of absolute positions, RMS norm, a gated feed-forward
network, no biases, unscaled scores and a rescaled input to the output layer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnscope.model.attention import MultiHeadAttention
from attnscope.model.blocks import Dropout, Generator, Residual, feed_forward, layer_norm
from attnscope.model.config import ModelConfig
from attnscope.model.kinds import KINDS, Kind
from attnscope.model.positions import LearnedPositions, NoPositions, RelativePositionBias, SinusoidalPositions

POSITIONS = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions, "relative": NoPositions}


@dataclass
class LayerCache:
    """Keys/values one decoder layer has seen: its own past (grows) and the source (fixed)."""

    self_k: Tensor | None = None  # (B, H, t, dh)
    self_v: Tensor | None = None
    cross_k: Tensor | None = None  # (B, H, S, dh)
    cross_v: Tensor | None = None
    qkv_weights: tuple[Tensor, Tensor] | None = None  # self-attention's packed projection, made at the first step


@dataclass
class DecoderCache:
    """Per-layer KV cache for incremental decoding."""

    layers: list[LayerCache]
    length: int = 0  # target positions already processed

    @classmethod
    def empty(cls, n_layers: int) -> "DecoderCache":
        return cls([LayerCache() for _ in range(n_layers)])

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows `index` (beam search reorders and prunes hypotheses)."""
        for layer in self.layers:
            for name in ("self_k", "self_v", "cross_k", "cross_v"):
                value = getattr(layer, name)
                if value is not None:
                    setattr(layer, name, value.index_select(0, index))


@dataclass(frozen=True)
class EncoderOutput:
    """What the encoder computed for a batch of sources."""

    memory: Tensor  # (B, S, D) the encoder's output, after its final norm (if any)
    mask: Tensor | None  # (B, 1, 1, S) True on real keys; None when nothing is padded
    attentions: tuple[Tensor, ...] | None = None  # each layer's self-attention weights (B, H, S, S), when asked

    def repeat(self, k: int) -> "EncoderOutput":
        """Each source k times in a row (a beam of k hypotheses per source)."""
        mask = None if self.mask is None else self.mask.repeat_interleave(k, 0)
        return EncoderOutput(self.memory.repeat_interleave(k, 0), mask)


@dataclass(frozen=True)
class DecoderOutput:
    """What the decoder computed for target positions."""

    logits: Tensor  # (B, T, V) next-token logits, or (B, 1, V) for the last position only
    self_attentions: tuple[Tensor, ...] | None = None  # each layer's masked self-attention (B, H, T, K), when asked
    cross_attentions: tuple[Tensor, ...] | None = None  # each layer's cross-attention (B, H, T, S), when asked


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

    def forward(self, x: Tensor, mask: Tensor | None, need_weights: bool = False,
                bias: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """The layer's output (B, S, D) and, when asked, its self-attention weights (B, H, S, S); `bias` (1, H, S, S)
        is the stack's relative position bias (T5)."""
        weights = None

        def attend(h: Tensor) -> Tensor:
            nonlocal weights
            out, weights = self.self_attn(*self.self_attn.project_qkv(h), mask, need_weights, bias)
            return out
        x = self.attn_block(x, attend)
        return self.ffn_block(x, self.ffn), weights


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig, first: bool = False) -> None:
        super().__init__()
        self.self_attn, self.cross_attn = attention(c, "decoder"), attention(c, "cross")
        self.relative_bias = relative_bias(c, first, bidirectional=False)  # cross-attention has none
        self.ffn = feed_forward(c)
        self.self_block, self.cross_block, self.ffn_block = (Residual(c) for _ in range(3))

    def _self(self, h: Tensor, cache: LayerCache | None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of masked self-attention: with a cache, the keys of every earlier position too."""
        if cache is None:
            return self.self_attn.project_qkv(h)
        cache.qkv_weights = cache.qkv_weights or self.self_attn.qkv_weights()
        q, k, v = self.self_attn.project_qkv(h, cache.qkv_weights)
        if cache.self_k is not None:
            k, v = torch.cat([cache.self_k, k], dim=2), torch.cat([cache.self_v, v], dim=2)
        cache.self_k, cache.self_v = k, v
        return q, k, v

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
        x = self.self_block(x, attend_self)
        x = self.cross_block(x, attend_source)
        return self.ffn_block(x, self.ffn), self_weights, cross_weights


def causal_mask(n_queries: int, n_keys: int, device: torch.device) -> Tensor:
    """True where query i (the last `n_queries` of `n_keys` positions) may see key j <= i."""
    offset = n_keys - n_queries
    q = torch.arange(n_queries, device=device).unsqueeze(1) + offset
    return torch.arange(n_keys, device=device).unsqueeze(0) <= q  # (Q, K)


class Transformer(nn.Module):
    """Encoder-decoder Transformer; `forward(src, tgt_in)` returns next-token logits."""

    def __init__(self, config: ModelConfig, initialise: bool = True) -> None:
        """`initialise` False leaves torch's default initialisation alone, for a caller that assigns every weight
        (loading a checkpoint): the model's own initialisation would be computed only to be thrown away."""
        super().__init__()
        c = self.config = config
        # <pad>'s row learns nothing (padding_idx), unless the decoder starts on <pad> (T5, Marian) and so reads it
        pad_row = None if (c.bos_id if c.decoder_start is None else c.decoder_start) == c.pad_id else c.pad_id
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=pad_row)
        self.src_embed = self.tgt_embed if c.share_embeddings else nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.positions = POSITIONS[c.positional](c)
        self.src_embed_norm = layer_norm(c) if c.embed_norm else nn.Identity()
        self.tgt_embed_norm = layer_norm(c) if c.embed_norm else nn.Identity()
        self.embed_dropout = Dropout(c.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(c, first=i == 0) for i in range(c.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(c, first=i == 0) for i in range(c.n_decoder_layers))
        self.encoder_norm = layer_norm(c) if c.has_final_norm else nn.Identity()
        self.decoder_norm = layer_norm(c) if c.has_final_norm else nn.Identity()
        self.generator = Generator(c.d_model, c.tgt_vocab_size, c.suppressed, c.scale_output)
        if initialise:
            self._init_weights()
        if c.tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    def _init_weights(self) -> None:
        for name, p in self.named_parameters():
            if "embed_norm" in name:
                continue  # LayerNorm: ones and zeros, as built
            if "embed" in name or name.startswith("positions"):
                nn.init.normal_(p, 0.0, self.config.d_model ** -0.5)
            elif p.dim() > 1:
                nn.init.xavier_uniform_(p)
        with torch.no_grad():
            self.tgt_embed.weight[self.config.pad_id].zero_()
            self.src_embed.weight[self.config.pad_id].zero_()

    def _embed(self, table: nn.Embedding, ids: Tensor, offset: int = 0, decoder: bool = False) -> Tensor:
        c = self.config
        if decoder and offset == 0 and c.decoder_start is not None:  # the first position reads the start token
            ids = torch.cat([torch.full_like(ids[:, :1], c.decoder_start), ids[:, 1:]], dim=1)
        x = table(ids) * (math.sqrt(c.d_model) if c.embed_scale else 1.0)
        x = x + self.positions(ids.shape[1], offset, decoder)
        x = (self.tgt_embed_norm if decoder else self.src_embed_norm)(x)
        return self.embed_dropout(x)  # (B, N, D)

    @staticmethod
    def _relative_bias(stack: nn.ModuleList, n_queries: int, n_keys: int, offset: int = 0) -> Tensor | None:
        """The stack's relative position bias (1, H, Q, K) from its first layer's table (T5); None without one."""
        table = stack[0].relative_bias
        return None if table is None else table(n_queries, n_keys, offset)

    def encode(self, src: Tensor, output_attentions: bool = False) -> EncoderOutput:
        """Source ids (B, S) -> what the decoder reads (and, when asked, every encoder layer's weights)."""
        if src.shape[1] > self.config.max_len:
            raise ValueError(f"source has {src.shape[1]} tokens; this model handles at most {self.config.max_len}")
        mask: Tensor | None = (src != self.config.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        if bool(mask.all()):
            mask = None  # lets SDPA take its unmasked fast path
        x = self._embed(self.src_embed, src)
        bias = self._relative_bias(self.encoder, src.shape[1], src.shape[1])
        attentions = []
        for layer in self.encoder:
            x, weights = layer(x, mask, output_attentions, bias)
            attentions.append(weights)
        return EncoderOutput(self.encoder_norm(x), mask, tuple(attentions) if output_attentions else None)

    def decode(self, tgt: Tensor, source: EncoderOutput, cache: DecoderCache | None = None, *, last_only: bool = False,
               output_attentions: bool = False) -> DecoderOutput:
        """Target ids (B, T) -> logits (B, T, V), or (B, 1, V) for the last position only (what decoding
        needs: the output layer is the costliest matmul of a step). With a cache, `tgt` holds only the new positions."""
        offset = cache.length if cache is not None else 0
        n_keys = offset + tgt.shape[1]
        if n_keys > self.config.max_len:
            raise ValueError(f"target reached {n_keys} tokens; this model handles at most {self.config.max_len}")
        self_mask: Tensor | None = causal_mask(tgt.shape[1], n_keys, tgt.device)[None, None]  # (1, 1, T, K)
        if cache is None:
            keep = (tgt != self.config.pad_id) | (torch.arange(tgt.shape[1], device=tgt.device) == 0)  # the start may be <pad>
            self_mask = self_mask & keep[:, None, None, :]  # (B, 1, T, T)
        elif tgt.shape[1] == 1:
            self_mask = None  # one new position may see every cached one
        x = self._embed(self.tgt_embed, tgt, offset, decoder=True)
        bias = self._relative_bias(self.decoder, tgt.shape[1], n_keys, offset)  # with a cache: the new rows only
        selves, crosses = [], []
        for i, layer in enumerate(self.decoder):
            x, self_weights, cross_weights = layer(x, source.memory, self_mask, source.mask,
                                                   None if cache is None else cache.layers[i], output_attentions, bias)
            selves.append(self_weights)
            crosses.append(cross_weights)
        if cache is not None:
            cache.length = n_keys
        logits = self.generator(self.decoder_norm(x[:, -1:] if last_only else x))
        first = n_keys - 1 if last_only else offset  # target position of the first row of logits
        if first == 0 and self.config.forced_first is not None:
            logits = self._forced(logits)
        if not output_attentions:
            return DecoderOutput(logits)
        return DecoderOutput(logits, tuple(selves), tuple(crosses))

    def _forced(self, logits: Tensor) -> Tensor:
        """Row 0 (target position 0) made certain of config.forced_first, as Hugging Face's forced BOS does."""
        row = torch.full_like(logits[:, :1], float("-inf"))
        row[..., self.config.forced_first] = 0.0
        return torch.cat([row, logits[:, 1:]], dim=1)

    def next_logits(self, tgt: Tensor, source: EncoderOutput, cache: DecoderCache | None = None) -> Tensor:
        """Logits (B, V) of the token after `tgt`: one decoding step."""
        return self.decode(tgt, source, cache, last_only=True).logits[:, -1]

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Next-token logits (B, T, V) of every target position: teacher forcing, as training reads them."""
        return self.decode(tgt, self.encode(src)).logits

    def attention_modules(self) -> dict[str, MultiHeadAttention]:
        """Every attention module by its dotted name, encoder first, in forward order."""
        return {name: m for name, m in self.named_modules() if isinstance(m, MultiHeadAttention)}

    def attention_by_kind(self) -> dict[Kind, dict[str, MultiHeadAttention]]:
        """The attention modules of each kind by name, in layer order."""
        groups: dict[Kind, dict[str, MultiHeadAttention]] = {kind: {} for kind in KINDS}
        for name, module in self.attention_modules().items():
            groups[module.kind][name] = module
        return groups
