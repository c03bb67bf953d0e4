"""The pieces around attention in every layer: the position-wise feed-forward network (section 3.3) or its gated
variant, LayerNorm in the variants models use, the residual block that joins them (section 5.4's dropout
included), and the output layer."""
from __future__ import annotations

from functools import partial
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnscope.model.attention import dropout
from attnscope.model.config import ModelConfig
from attnscope.model.hooks import BLOCK, NORM_IN, NORM_OUT, RESID_POST, RESID_PRE, HookPoints


class Dropout(nn.Dropout):
    """nn.Dropout through `dropout` (its cheaper CPU masks)."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)


# "gelu_tanh" is GELU's tanh approximation (Hendrycks & Gimpel 2016, eq. 2), T5 v1.1's and mT5's "gelu_new".
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu,
                                                      "gelu_tanh": partial(F.gelu, approximate="tanh")}


class FeedForward(nn.Module):
    """Position-wise two-layer network with ReLU (section 3.3), GELU or SiLU (swish); T5 has no biases."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str = "relu", bias: bool = True) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(d_model, d_ff, bias=bias), nn.Linear(d_ff, d_model, bias=bias)
        self.dropout, self.activation = Dropout(dropout), ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.dropout(self.activation(self.up(x))))


class GatedFeedForward(nn.Module):
    """A GLU variant (Shazeer 2020, eq. 6): down(act(x W_gate) ⊙ x W_up); with GELU's tanh approximation and no
    biases, T5 v1.1's, Flan-T5's and mT5's feed-forward network (their wi_0, wi_1, wo)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str, bias: bool) -> None:
        super().__init__()
        self.gate, self.up = nn.Linear(d_model, d_ff, bias=bias), nn.Linear(d_model, d_ff, bias=bias)
        self.down, self.dropout, self.activation = nn.Linear(d_ff, d_model, bias=bias), Dropout(dropout), ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        return self.down(self.dropout(self.activation(self.gate(x)) * self.up(x)))


def feed_forward(c: ModelConfig) -> FeedForward | GatedFeedForward:
    """The config's feed-forward network (config.ffn)."""
    kind = GatedFeedForward if c.ffn == "gated" else FeedForward
    return kind(c.d_model, c.d_ff, c.dropout, c.activation, c.ffn_bias)


class AnnotatedLayerNorm(nn.Module):
    """The Annotated Transformer's LayerNorm: (x - mean) / (unbiased std + eps), then scale and shift."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(d_model)), nn.Parameter(torch.zeros(d_model)), eps

    def forward(self, x: Tensor) -> Tensor:
        return self.weight * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + self.eps) + self.bias


class RMSNorm(nn.Module):
    """T5's LayerNorm, root mean square normalisation (Zhang & Sennrich 2019, eq. 4): x / √(mean(x²) + eps) × weight,
    with no mean subtracted and no bias; the mean of squares in float32 at least, so half-precision inputs do not
    overflow (and a float64 copy, as value zeroing makes, stays float64)."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d_model)), eps

    def forward(self, x: Tensor) -> Tensor:
        mean_square = x.to(torch.promote_types(x.dtype, torch.float32)).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(mean_square + self.eps)).to(self.weight.dtype)


def layer_norm(c: ModelConfig) -> nn.Module:
    """The config's LayerNorm variant; each keeps its scale as `weight`, and all but RMSNorm a `bias`."""
    if c.layer_norm == "annotated":
        return AnnotatedLayerNorm(c.d_model, c.norm_eps)
    if c.layer_norm == "rms":
        return RMSNorm(c.d_model, c.norm_eps)
    return nn.LayerNorm(c.d_model, eps=c.norm_eps)


class Residual(nn.Module):
    """Residual connection with LayerNorm after (post-LN, the paper's) or before (pre-LN). Its hook points (`hooks`,
    the table's BLOCK rows in hooks.py): the stream entering and leaving it, what its LayerNorm reads and returns."""

    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        self.norm, self.dropout, self.pre = layer_norm(c), Dropout(c.dropout), c.norm == "pre"
        self.hooks = HookPoints(BLOCK)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.hooks.listeners:  # one check while nobody listens: blocks run 3 times a decoder layer
            return self._heard(x, sublayer)
        if self.pre:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))

    def _heard(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        """`forward`, passing the stream and the LayerNorm's input and output through the hook points."""
        at = self.hooks.at
        x = at(RESID_PRE, x)
        if self.pre:
            return at(RESID_POST, x + self.dropout(sublayer(at(NORM_OUT, self.norm(at(NORM_IN, x))))))
        return at(RESID_POST, at(NORM_OUT, self.norm(at(NORM_IN, x + self.dropout(sublayer(x))))))


class Generator(nn.Linear):
    """The output layer; tokens in `suppressed` (rows the original model lacks, or that it bans) get logit -inf.
    With `scale_input` (T5 v1.0, config.scale_output) its input is first multiplied by d_model^-0.5: T5's output
    layer is its embedding, initialised with unit variance, so the product would otherwise grow with √d_model."""

    def __init__(self, d_model: int, vocab_size: int, suppressed: tuple[int, ...] = (), scale_input: bool = False) -> None:
        super().__init__(d_model, vocab_size)
        self.register_buffer("suppressed", torch.tensor(suppressed, dtype=torch.long, device="cpu"), persistent=False)
        self.input_scale = d_model ** -0.5 if scale_input else None

    def forward(self, x: Tensor) -> Tensor:
        logits = super().forward(x if self.input_scale is None else x * self.input_scale)
        # in place: the product is a fresh tensor, and a copy of it would be 58101 floats a decoding step (opus-mt)
        return logits.index_fill_(-1, self.suppressed, float("-inf")) if len(self.suppressed) else logits
