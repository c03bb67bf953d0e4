"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017, fig. 1).

Read top to bottom: the KV cache, what the encoder and decoder return, then the model. The layers are layers.py,
attention is attention.py; the feed-forward network, LayerNorm, the residual block and the output layer are
blocks.py; positions are positions.py. Every tensor the engine may read passes a named hook point (hooks.py).
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
from attnscope.model.blocks import Dropout, Generator, layer_norm
from attnscope.model.config import ModelConfig
from attnscope.model.hooks import DECODER, EMBED, EMBEDDED, ENCODER, FINAL, MEMORY, POS
from attnscope.model.kinds import KINDS, Kind
from attnscope.model.layers import DecoderLayer, EncoderLayer, LayerCache, Stack
from attnscope.model.positions import LearnedPositions, NoPositions, SinusoidalPositions

POSITIONS = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions, "relative": NoPositions}


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
            layer.reorder(index)


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
        self.embedding_scale = math.sqrt(c.d_model) if c.embed_scale else 1.0  # section 3.4
        self.encoder = Stack((EncoderLayer(c, first=i == 0) for i in range(c.n_encoder_layers)), ENCODER)
        self.decoder = Stack((DecoderLayer(c, first=i == 0) for i in range(c.n_decoder_layers)), DECODER)
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

    def embed(self, ids: Tensor, offset: int = 0, decoder: bool = False) -> Tensor:
        """What a stack's first layer reads (B, N, D), through the stack's hook points."""
        c, at = self.config, (self.decoder if decoder else self.encoder).hooks.at
        if decoder and offset == 0 and c.decoder_start is not None:  # the first position reads the start token
            ids = torch.cat([torch.full_like(ids[:, :1], c.decoder_start), ids[:, 1:]], dim=1)
        x = at(EMBED, (self.tgt_embed if decoder else self.src_embed)(ids)) * self.embedding_scale
        x = x + at(POS, self.positions(ids.shape[1], offset, decoder))
        x = (self.tgt_embed_norm if decoder else self.src_embed_norm)(x)
        return at(EMBEDDED, self.embed_dropout(x))

    @staticmethod
    def _relative_bias(stack: Stack, n_queries: int, n_keys: int, offset: int = 0) -> Tensor | None:
        """The stack's relative position bias (1, H, Q, K) from its first layer's table (T5); None without one."""
        table = stack[0].relative_bias
        return None if table is None else table(n_queries, n_keys, offset)

    def encode(self, src: Tensor, output_attentions: bool = False) -> EncoderOutput:
        """Source ids (B, S) -> what the decoder reads (and, when asked, every encoder layer's weights)."""
        if src.shape[1] > self.config.max_len:
            raise ValueError(f"source has {src.shape[1]} tokens; this model handles at most {self.config.max_len}")
        mask = self.source_mask(src)
        x = self.embed(src)
        bias = self._relative_bias(self.encoder, src.shape[1], src.shape[1])
        attentions = []
        for layer in self.encoder:
            x, weights = layer(x, mask, output_attentions, bias)
            attentions.append(weights)
        memory = self.encoder.hooks.at(MEMORY, self.encoder_norm(x))
        return EncoderOutput(memory, mask, tuple(attentions) if output_attentions else None)

    def source_mask(self, src: Tensor) -> Tensor | None:
        """(B, 1, 1, S) True on real keys; None when nothing is padded (lets SDPA take its unmasked fast path)."""
        mask = (src != self.config.pad_id)[:, None, None, :]
        return None if bool(mask.all()) else mask

    def target_mask(self, tgt: Tensor, cache: DecoderCache | None = None) -> Tensor | None:
        """What each of the new positions `tgt` (B, T) may see: earlier positions, not padding (the start may be
        <pad>), (B, 1, T, K); with a cache every cached key, None for one new position."""
        offset = cache.length if cache is not None else 0
        mask = causal_mask(tgt.shape[1], offset + tgt.shape[1], tgt.device)[None, None]  # (1, 1, T, K)
        if cache is None:
            keep = (tgt != self.config.pad_id) | (torch.arange(tgt.shape[1], device=tgt.device) == 0)
            return mask & keep[:, None, None, :]  # (B, 1, T, T)
        return None if tgt.shape[1] == 1 else mask

    def decode(self, tgt: Tensor, source: EncoderOutput, cache: DecoderCache | None = None, *, last_only: bool = False,
               output_attentions: bool = False) -> DecoderOutput:
        """Target ids (B, T) -> logits (B, T, V), or (B, 1, V) for the last position only (what decoding
        needs: the output layer is the costliest matmul of a step). With a cache, `tgt` holds only the new positions."""
        offset = cache.length if cache is not None else 0
        n_keys = offset + tgt.shape[1]
        if n_keys > self.config.max_len:
            raise ValueError(f"target reached {n_keys} tokens; this model handles at most {self.config.max_len}")
        self_mask = self.target_mask(tgt, cache)
        x = self.embed(tgt, offset, decoder=True)
        bias = self._relative_bias(self.decoder, tgt.shape[1], n_keys, offset)  # with a cache: the new rows only
        selves, crosses = [], []
        for i, layer in enumerate(self.decoder):
            x, self_weights, cross_weights = layer(x, source.memory, self_mask, source.mask,
                                                   None if cache is None else cache.layers[i], output_attentions, bias)
            selves.append(self_weights)
            crosses.append(cross_weights)
        if cache is not None:
            cache.length = n_keys
        x = self.decoder.hooks.at(FINAL, x)
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
