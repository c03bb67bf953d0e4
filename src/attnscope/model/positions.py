"""Where each token sits: the paper's fixed sinusoids (section 3.5) in the layouts other frameworks compute them,
a learned table per position, or none (T5), whose positions are a learned bias on the attention scores by the
bucket of each query-key offset (RelativePositionBias)."""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnscope.model.config import ModelConfig


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


class NoPositions(nn.Module):
    """No absolute positions (positional "relative", T5's): zeros, so that what a stack's first layer reads is still
    "embedding + position" (every view of it shows that nothing was added)."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.register_buffer("zero", torch.zeros(1, c.d_model, device="cpu"), persistent=False)

    def forward(self, length: int, offset: int = 0, decoder: bool = False) -> Tensor:
        return self.zero.expand(length, -1)  # (N, D)


class RelativePositionBias(nn.Module):
    """T5's relative position bias (Raffel et al. 2020, section 2.1): a learned number per head for each bucket of
    the offset key - query, added to the self-attention scores before the softmax; one table per stack, whose bias
    every layer of the stack adds. The encoder's is bidirectional, the decoder's sees only earlier keys."""

    def __init__(self, c: ModelConfig, bidirectional: bool) -> None:
        super().__init__()
        self.table = nn.Embedding(c.relative_buckets, c.n_heads)
        self.max_distance, self.bidirectional = c.relative_max_distance, bidirectional

    def forward(self, n_queries: int, n_keys: int, offset: int = 0) -> Tensor:
        """The bias (1, H, Q, K) of queries at positions offset .. offset + Q - 1 over keys 0 .. K - 1 (with the KV
        cache, a decoding step's rows of the full matrix)."""
        device = self.table.weight.device
        queries, keys = torch.arange(offset, offset + n_queries, device=device), torch.arange(n_keys, device=device)
        buckets = relative_bucket(keys[None, :] - queries[:, None], self.table.num_embeddings, self.max_distance,
                                  self.bidirectional)
        return self.table(buckets).permute(2, 0, 1).unsqueeze(0)


def relative_bucket(offset: Tensor, n_buckets: int, max_distance: int, bidirectional: bool) -> Tensor:
    """T5's bucket of each offset key - query, as Mesh TensorFlow computes it: distances below half the buckets
    get one each, longer ones share buckets that widen logarithmically up to `max_distance`, beyond which all
    share the last. Bidirectional (the encoder), each direction has half the buckets, later keys the upper half;
    otherwise (the decoder) a later key counts as distance 0."""
    if bidirectional:
        n_buckets //= 2
        base, distance = (offset > 0).long() * n_buckets, offset.abs()
    else:
        base, distance = torch.zeros_like(offset), (-offset).clamp(min=0)
    exact = n_buckets // 2
    # in float32 and in this order of operations, as the original, so that the buckets' edges fall where they do there
    wide = exact + (torch.log(distance.clamp(min=exact).float() / exact) / math.log(max_distance / exact)
                    * (n_buckets - exact)).long()
    return base + torch.where(distance < exact, distance, wide.clamp(max=n_buckets - 1))


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
