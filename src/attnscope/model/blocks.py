"""The pieces around attention in every layer: the position-wise feed-forward network (section 3.3), LayerNorm in
the variants models use, and the residual block that joins them (section 5.4's dropout included)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnscope.model.attention import dropout
from attnscope.model.config import ModelConfig


class Dropout(nn.Dropout):
    """nn.Dropout through `dropout` (its cheaper CPU masks)."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)


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
