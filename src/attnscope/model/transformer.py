"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017, fig. 1).

Every attention module has a kind (encoder / decoder / cross, see kinds.py), a hook point on its softmaxed weights
(shape [batch, head, query, key], after the softmax, before dropout) and a sink for them that the recorder sets
(cheaper than a hook), so a recorder can capture exactly what the model computed. When nothing is hooked or
sunk, attention runs through `F.scaled_dot_product_attention` (except in CPU training with attention dropout,
see `dropout`); both paths compute the same function.

The variants that models trained elsewhere need (Hugging Face Marian, BART, mBART, M2M100/NLLB, fairseq,
OpenNMT-py) are config fields whose defaults are the paper's model: other sinusoid layouts and position
offsets, a separate decoder position table, LayerNorm on the embeddings, q/k/v without biases, a decoder
start token other than <bos>, a forced first output (a language code) and tokens never output.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from threading import get_ident
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnscope.model.config import ModelConfig
from attnscope.model.kinds import KINDS, Kind


class HookPoint(nn.Module):
    """Identity module marking a tensor that hooks may read (TransformerLens-style)."""

    def forward(self, x: Tensor) -> Tensor:
        return x

    @property
    def hooked(self) -> bool:
        return bool(self._forward_hooks)


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """F.dropout, but on the CPU the mask comes from uniform floats compared with p (the same keep probability,
    1 - p): the CPU's bernoulli_ costs ~10 ns an element, which made dropout masks a sixth of a training step."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p)
    return x * torch.rand(x.shape).ge_(p).mul_(1.0 / (1.0 - p)).to(x.dtype)


class Dropout(nn.Dropout):
    """nn.Dropout through `dropout`."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    b, n, d = x.shape
    return x.view(b, n, n_heads, d // n_heads).transpose(1, 2)  # (B, H, N, dh)


def packed_linear(*layers: nn.Linear) -> tuple[Tensor, Tensor | None]:
    """Several linear layers of one input as one weight and bias: a wide product uses the CPU's
    threads far better than narrow ones (measured in BENCHMARKS.md, section 1). Layers without
    biases (config.qkv_bias False) pack to no bias."""
    biases = [layer.bias for layer in layers]
    return torch.cat([layer.weight for layer in layers]), None if biases[0] is None else torch.cat(biases)


_ZEROS: dict[tuple[torch.dtype, torch.device], Tensor] = {}


def _zero(like: Tensor) -> Tensor:
    """A 0-d zero of `like`'s dtype and device (baddbmm's ignored addend), made once."""
    zero = _ZEROS.get((like.dtype, like.device))
    if zero is None:
        with torch.inference_mode(False):  # a plain tensor, also when first made while decoding in inference mode
            zero = _ZEROS[(like.dtype, like.device)] = torch.zeros((), dtype=like.dtype, device=like.device)
    return zero


class Sink(NamedTuple):
    """Where a recorder wants an attention module's softmaxed weights (B, H, Q, K): each call made from thread
    `thread` appends its tensor (detached if it has a graph) to `calls[name]`. The same tensor a hook on
    `hook_pattern` would see (the sink reads it after the hooks), at a fraction of the cost: a `HookPoint` is a
    module call with hook dispatch, about 3 µs in a decoding step that is itself small (BENCHMARKS.md, capture
    overhead)."""

    thread: int
    calls: dict[str, list[Tensor]]
    name: str


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over several heads (section 3.2.2)."""

    def __init__(self, *, d_model: int, n_heads: int, dropout: float, kind: Kind, qkv_bias: bool = True) -> None:
        super().__init__()
        self.kind, self.n_heads = kind, n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = dropout
        self.hook_scores = HookPoint()  # scaled scores (B, H, Q, K) with -inf where masked, before the softmax
        self.hook_pattern = HookPoint()  # weights (B, H, Q, K)
        self.sink: Sink | None = None  # set by a recorder: this module's weights go there, no module call (see Sink)

    def _heads(self, projected: Tensor, n: int) -> list[Tensor]:
        """Split n projections computed side by side into heads, each (B, H, N, dh)."""
        return [split_heads(t, self.n_heads) for t in projected.chunk(n, -1)]

    def qkv_weights(self) -> tuple[Tensor, Tensor | None]:
        """The q/k/v projections as one (3D, D) weight and its bias."""
        return packed_linear(self.q_proj, self.k_proj, self.v_proj)

    def project_qkv(self, x: Tensor, weights: tuple[Tensor, Tensor | None] | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of `x` for self-attention, each (B, H, N, dh). Incremental decoding
        passes `weights` (from qkv_weights()) packed once per sentence instead of once per step."""
        q, k, v = self._heads(F.linear(x, *(weights or self.qkv_weights())), 3)
        return q, k, v

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of `x`, each (B, H, K, dh); computed once per source by incremental decoding."""
        k, v = self._heads(F.linear(x, *packed_linear(self.k_proj, self.v_proj)), 2)
        return k, v

    def project_q(self, x: Tensor) -> Tensor:
        return split_heads(self.q_proj(x), self.n_heads)

    def forward(self, q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None) -> Tensor:
        """Attend from projected queries `q` (B, H, Q, dh) to keys/values; `mask` is True where allowed (None: all).
        Returns (B, Q, D)."""
        p = self.dropout if self.training else 0.0
        scores_hooked, pattern_hooked = self.hook_scores.hooked, self.hook_pattern.hooked
        if self.sink is not None or pattern_hooked or scores_hooked or (p and q.device.type == "cpu"):
            out = self._explicit(q, keys, values, mask, p, scores_hooked, pattern_hooked)
        else:
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=p)
        b, h, n, dh = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, n, h * dh))  # heads side by side (B, Q, H*dh) -> (B, Q, D)

    def _explicit(self, q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, p: float,
                  scores_hooked: bool, pattern_hooked: bool) -> Tensor:
        """softmax(q kᵀ / √d_k) v with the weights made, through the hook points and the sink: (B, H, Q, dh).
        Recording takes this path for 8 calls a decoding step, where each kernel launch and Python step costs
        about what these small products do: the heads stay one batch axis (B*H) from the first product to the
        last, the scale is applied inside the first, and a 4-D view (B, H, Q, K) is made only where the mask,
        a hook or the sink needs one (each view or reshape is ~0.8 µs; a softmax over 3-D rows is cheaper)."""
        b, h, n, dh = q.shape
        scores = torch.baddbmm(_zero(q), q.reshape(b * h, n, dh), keys.reshape(b * h, -1, dh).mT, beta=0,
                               alpha=dh ** -0.5)  # (B*H, Q, K)
        if mask is not None or scores_hooked:
            shaped = scores.view(b, h, n, -1)
            if mask is not None:
                shaped = shaped.masked_fill(~mask, float("-inf"))
            if scores_hooked:
                shaped = self.hook_scores(shaped)
            scores = shaped.reshape(b * h, n, -1)
        weights = scores.softmax(-1)
        sink = self.sink
        if pattern_hooked or sink is not None:
            shaped = weights.view(b, h, n, -1)
            if pattern_hooked:
                shaped = self.hook_pattern(shaped)
                weights = shaped.reshape(b * h, n, -1)
            if sink is not None and sink.thread == get_ident():  # after the hooks: what the model goes on with
                sink.calls.setdefault(sink.name, []).append(shaped.detach() if shaped.requires_grad else shaped)
        if p:
            weights = dropout(weights, p, True)
        return torch.bmm(weights, values.reshape(b * h, -1, dh)).view(b, h, n, dh)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}


class FeedForward(nn.Module):
    """Position-wise two-layer network with ReLU (section 3.3), GELU or SiLU (swish)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu") -> None:
        super().__init__()
        self.up, self.down, self.dropout = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model), Dropout(dropout)
        self.activation = ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.dropout(self.activation(self.up(x))))


class AnnotatedLayerNorm(nn.Module):
    """The Annotated Transformer's LayerNorm: (x - mean) / (unbiased std + eps), then scale and shift."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model)), eps

    def forward(self, x: Tensor) -> Tensor:
        return self.weight * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + self.eps) + self.bias


def layer_norm(c: ModelConfig) -> nn.Module:
    """The config's LayerNorm variant; both keep their parameters as `weight` and `bias`."""
    if c.layer_norm == "annotated":
        return AnnotatedLayerNorm(c.d_model, c.norm_eps)
    return nn.LayerNorm(c.d_model, eps=c.norm_eps)


class Residual(nn.Module):
    """Residual connection with LayerNorm after (post-LN, the paper's) or before (pre-LN)."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.norm, self.dropout, self.pre = layer_norm(c), Dropout(c.dropout), c.norm == "pre"

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


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


class EncoderLayer(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model=c.d_model, n_heads=c.n_heads, dropout=c.attention_dropout,
                                            kind="encoder", qkv_bias=c.qkv_bias)
        self.ffn = FeedForward(c.d_model, c.d_ff, c.dropout, c.activation)
        self.attn_block, self.ffn_block = Residual(c), Residual(c)

    def forward(self, x: Tensor, mask: Tensor | None) -> Tensor:
        x = self.attn_block(x, lambda h: self.self_attn(*self.self_attn.project_qkv(h), mask))
        return self.ffn_block(x, self.ffn)


class DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        kw = dict(d_model=c.d_model, n_heads=c.n_heads, dropout=c.attention_dropout, qkv_bias=c.qkv_bias)
        self.self_attn = MultiHeadAttention(**kw, kind="decoder")
        self.cross_attn = MultiHeadAttention(**kw, kind="cross")
        self.ffn = FeedForward(c.d_model, c.d_ff, c.dropout, c.activation)
        self.self_block, self.cross_block, self.ffn_block = (Residual(c) for _ in range(3))

    def _self(self, h: Tensor, mask: Tensor | None, cache: LayerCache | None) -> Tensor:
        if cache is None:
            return self.self_attn(*self.self_attn.project_qkv(h), mask)
        cache.qkv_weights = cache.qkv_weights or self.self_attn.qkv_weights()
        q, k, v = self.self_attn.project_qkv(h, cache.qkv_weights)
        if cache.self_k is not None:
            k, v = torch.cat([cache.self_k, k], dim=2), torch.cat([cache.self_v, v], dim=2)
        cache.self_k, cache.self_v = k, v
        return self.self_attn(q, k, v, mask)

    def _cross(self, h: Tensor, memory: Tensor, mask: Tensor | None, cache: LayerCache | None) -> Tensor:
        if cache is not None and cache.cross_k is not None:
            k, v = cache.cross_k, cache.cross_v
        else:
            k, v = self.cross_attn.project_kv(memory)
            if cache is not None:  # strided views of one packed projection: contiguous once, read every step
                k, v = k.contiguous(), v.contiguous()
                cache.cross_k, cache.cross_v = k, v
        return self.cross_attn(self.cross_attn.project_q(h), k, v, mask)

    def forward(self, x: Tensor, memory: Tensor, self_mask: Tensor | None, cross_mask: Tensor | None,
                cache: LayerCache | None = None) -> Tensor:
        x = self.self_block(x, lambda h: self._self(h, self_mask, cache))
        x = self.cross_block(x, lambda h: self._cross(h, memory, cross_mask, cache))
        return self.ffn_block(x, self.ffn)


class SinusoidalPositions(nn.Module):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (section 3.5), or a variant (config.sinusoid);
    position i reads row i + config.position_offset."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.start = c.position_offset
        self.register_buffer("table", sinusoidal_table(c.max_len + c.position_offset, c.d_model, c.sinusoid),
                             persistent=False)

    def forward(self, length: int, offset: int = 0, decoder: bool = False) -> Tensor:
        start = self.start + offset
        return self.table[start:start + length]  # (N, D)


class LearnedPositions(nn.Module):
    """One trained vector per position (as in BERT and the seed tutorial's en-fr model); with
    config.separate_positions the decoder has its own table (BART)."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.start = c.position_offset
        self.table = nn.Embedding(c.max_len + c.position_offset, c.d_model)
        self.decoder_table = nn.Embedding(c.max_len + c.position_offset, c.d_model) if c.separate_positions else None

    def forward(self, length: int, offset: int = 0, decoder: bool = False) -> Tensor:
        table = self.decoder_table if decoder and self.decoder_table is not None else self.table
        start = self.start + offset
        return table.weight[start:start + length]  # (N, D)


def sinusoidal_table(max_len: int, d_model: int, layout: str = "interleaved") -> Tensor:
    """The fixed sinusoidal encodings, (max_len, d_model), always computed on the CPU: a model built on the
    meta device (to check shapes) would otherwise pay seconds of first-use setup for these few ops.
    Other layouts are computed the way their own code computes them, so the tables are the same to the bit."""
    if layout == "halves":
        return _halves_table(max_len, d_model)
    if layout == "fairseq":
        return _fairseq_table(max_len, d_model)
    position = torch.arange(max_len, dtype=torch.float32, device="cpu").unsqueeze(1)  # (N, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32, device="cpu") * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model, device="cpu")
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq[: d_model // 2])
    return table


def _halves_table(max_len: int, d_model: int) -> Tensor:
    """[sin | cos] halves at the paper's frequencies, in float64 then rounded (Marian's, as Hugging Face builds it)."""
    pos = torch.arange(max_len, dtype=torch.float64, device="cpu").unsqueeze(1)  # (N, 1)
    exponent = 2 * (torch.arange(d_model, dtype=torch.float64, device="cpu") // 2) / d_model  # (D,)
    angles = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64, device="cpu"), exponent)  # (N, D)
    half = (d_model + 1) // 2
    table = torch.empty(max_len, d_model, dtype=torch.float32, device="cpu")
    table[:, :half] = torch.sin(angles[:, 0::2]).float()
    table[:, half:] = torch.cos(angles[:, 1::2]).float()
    return table


def _fairseq_table(max_len: int, d_model: int) -> Tensor:
    """[sin | cos] halves with frequencies 10000^(-i/(d/2-1)) in float32 (tensor2tensor, fairseq, M2M100)."""
    half = d_model // 2
    step = math.log(10000) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.int64, device="cpu").float() * -step)  # (D/2,)
    angles = torch.arange(max_len, dtype=torch.int64, device="cpu").float().unsqueeze(1) * freq.unsqueeze(0)  # (N, D/2)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if d_model % 2:
        table = torch.cat([table, torch.zeros(max_len, 1, device="cpu")], dim=1)
    return table


def causal_mask(n_queries: int, n_keys: int, device: torch.device) -> Tensor:
    """True where query i (the last `n_queries` of `n_keys` positions) may see key j <= i."""
    offset = n_keys - n_queries
    q = torch.arange(n_queries, device=device).unsqueeze(1) + offset
    return torch.arange(n_keys, device=device).unsqueeze(0) <= q  # (Q, K)


class Generator(nn.Linear):
    """The output layer; tokens in `suppressed` (rows the original model lacks, or that it bans) get logit -inf."""

    def __init__(self, d_model: int, vocab_size: int, suppressed: tuple[int, ...] = ()) -> None:
        super().__init__(d_model, vocab_size)
        self.register_buffer("suppressed", torch.tensor(suppressed, dtype=torch.long, device="cpu"), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        logits = super().forward(x)
        return logits.index_fill(-1, self.suppressed, float("-inf")) if len(self.suppressed) else logits


class Transformer(nn.Module):
    """Encoder-decoder Transformer; `forward(src, tgt_in)` returns next-token logits."""

    def __init__(self, config: ModelConfig, initialise: bool = True) -> None:
        """`initialise` False leaves torch's default initialisation alone, for a caller that assigns every weight
        (loading a checkpoint): the model's own initialisation would be computed only to be thrown away."""
        super().__init__()
        c = self.config = config
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=c.pad_id)
        self.src_embed = self.tgt_embed if c.share_embeddings else nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=c.pad_id)
        positions = SinusoidalPositions if c.positional == "sinusoidal" else LearnedPositions
        self.positions = positions(c)
        self.src_embed_norm = layer_norm(c) if c.embed_norm else nn.Identity()
        self.tgt_embed_norm = layer_norm(c) if c.embed_norm else nn.Identity()
        self.embed_dropout = Dropout(c.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(c) for _ in range(c.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(c) for _ in range(c.n_decoder_layers))
        self.encoder_norm = layer_norm(c) if c.has_final_norm else nn.Identity()
        self.decoder_norm = layer_norm(c) if c.has_final_norm else nn.Identity()
        self.generator = Generator(c.d_model, c.tgt_vocab_size, c.suppressed)
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

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor | None]:
        """Source ids (B, S) -> memory (B, S, D) and the key mask (B, 1, 1, S), None if nothing is padded."""
        if src.shape[1] > self.config.max_len:
            raise ValueError(f"source has {src.shape[1]} tokens; this model handles at most {self.config.max_len}")
        mask: Tensor | None = (src != self.config.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        if bool(mask.all()):
            mask = None  # lets SDPA take its unmasked fast path
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, mask)
        return self.encoder_norm(x), mask

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None, cache: DecoderCache | None = None,
               last_only: bool = False) -> Tensor:
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
        for i, layer in enumerate(self.decoder):
            x = layer(x, memory, self_mask, src_mask, None if cache is None else cache.layers[i])
        if cache is not None:
            cache.length = n_keys
        logits = self.generator(self.decoder_norm(x[:, -1:] if last_only else x))
        first = n_keys - 1 if last_only else offset  # target position of the first row of logits
        return self._forced(logits) if first == 0 and self.config.forced_first is not None else logits

    def _forced(self, logits: Tensor) -> Tensor:
        """Row 0 (target position 0) made certain of config.forced_first, as Hugging Face's forced BOS does."""
        row = torch.full_like(logits[:, :1], float("-inf"))
        row[..., self.config.forced_first] = 0.0
        return torch.cat([row, logits[:, 1:]], dim=1)

    def next_logits(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None, cache: DecoderCache | None = None) -> Tensor:
        """Logits (B, V) of the token after `tgt`: one decoding step."""
        return self.decode(tgt, memory, src_mask, cache, last_only=True)[:, -1]

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(tgt, memory, src_mask)

    def attention_modules(self) -> dict[str, MultiHeadAttention]:
        """Every attention module by its dotted name, encoder first, in forward order."""
        return {name: m for name, m in self.named_modules() if isinstance(m, MultiHeadAttention)}

    def attention_by_kind(self) -> dict[Kind, dict[str, MultiHeadAttention]]:
        """The attention modules of each kind by name, in layer order."""
        groups: dict[Kind, dict[str, MultiHeadAttention]] = {kind: {} for kind in KINDS}
        for name, module in self.attention_modules().items():
            groups[module.kind][name] = module
        return groups
