"""Multi-head scaled dot-product attention (Vaswani et al. 2017, section 3.2.2), the one attention of the model.

`attend` is the one path: softmax(q kᵀ / √d_k + B) v, with the weights made when anyone needs them (the caller asks
for them, or someone listens to the hook points SCORES / PATTERN, see hooks.py), which the module then returns beside
its output.
B is T5's relative position bias (positions.RelativePositionBias; absent for other models), and T5 leaves out
the 1/√d_k (config.scale_scores), which its initialisation folds into the query projection.
When nobody looks at them it hands the same function to `F.scaled_dot_product_attention`: a fused kernel that
never makes the weights (the one speed trick; CPU training with attention dropout keeps the explicit
product, whose dropout masks are cheaper there, see `dropout`).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnscope.model.hooks import ATTENTION, BIAS, MASK, PATTERN, RESULT, SCORES, HookPoints, K, Q, V, Z
from attnscope.model.kinds import Kind


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """F.dropout, but on the CPU the mask comes from uniform floats compared with p (the same keep probability,
    1 - p): the CPU's bernoulli_ costs ~10 ns an element, which made dropout masks a sixth of a training step."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p)
    return x * torch.rand(x.shape).ge_(p).mul_(1.0 / (1.0 - p)).to(x.dtype)


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    b, n, d = x.shape
    return x.view(b, n, n_heads, d // n_heads).transpose(1, 2)  # (B, H, N, dh)


PACK_LIMIT = 1 << 20  # weights per projection up to which q/k/v (k/v) are packed into one product


def packs(layer: nn.Linear) -> bool:
    """Whether projections of `layer`'s size are worth packing: a narrow product uses the CPU's threads worse than
    one wide one (BENCHMARKS.md, section 1), but past ~1024 x 1024 each product is already wide and the packed copy
    costs more than it saves (NLLB-200 3.3B's shape: 1.2 GB copied per sentence, ~20% of a short decode)."""
    return layer.weight.numel() <= PACK_LIMIT


def packed_linear(*layers: nn.Linear) -> tuple[Tensor, Tensor | None]:
    """Several linear layers of one input as one weight and bias (layers without biases, config.qkv_bias False,
    pack to no bias)."""
    biases = [layer.bias for layer in layers]
    return torch.cat([layer.weight for layer in layers]), None if biases[0] is None else torch.cat(biases)


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention over several heads, of one kind (encoder / decoder / cross, see kinds.py).

    Its hook points (`hooks`, the table's ATTENTION rows in hooks.py): q, k, v, mask and bias as it reads them, the
    scores and the pattern, the heads side by side (z) and the result."""

    def __init__(self, *, d_model: int, n_heads: int, dropout: float, kind: Kind, qkv_bias: bool = True,
                 out_bias: bool = True, scale_scores: bool = True, head_dim: int | None = None) -> None:
        """`head_dim` None: d_model / n_heads; T5's heads may be wider or narrower (config.d_head)."""
        super().__init__()
        self.kind, self.n_heads, self.scale_scores = kind, n_heads, scale_scores
        inner = d_model if head_dim is None else n_heads * head_dim
        self.q_proj = nn.Linear(d_model, inner, bias=qkv_bias)
        self.k_proj = nn.Linear(d_model, inner, bias=qkv_bias)
        self.v_proj = nn.Linear(d_model, inner, bias=qkv_bias)
        self.out_proj = nn.Linear(inner, d_model, bias=out_bias)
        self.dropout = dropout
        self.hooks = HookPoints(ATTENTION)

    def _heads(self, projected: Tensor, n: int) -> list[Tensor]:
        """Split n projections computed side by side into heads, each (B, H, N, dh)."""
        return [split_heads(t, self.n_heads) for t in projected.chunk(n, -1)]

    def qkv_weights(self) -> tuple[Tensor, Tensor | None] | None:
        """The q/k/v projections as one (3 H dh, D) weight and its bias; None where they are not packed (packs)."""
        return packed_linear(self.q_proj, self.k_proj, self.v_proj) if packs(self.q_proj) else None

    def project_qkv(self, x: Tensor, weights: tuple[Tensor, Tensor | None] | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of `x` for self-attention, each (B, H, N, dh). Incremental decoding
        passes `weights` (from qkv_weights()) packed once per sentence instead of once per step."""
        weights = weights or self.qkv_weights()
        if weights is None:
            return self.project_q(x), *self._each(x, self.k_proj, self.v_proj)
        q, k, v = self._heads(F.linear(x, *weights), 3)
        return q, k, v

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of `x`, each (B, H, K, dh); computed once per source by incremental decoding."""
        if not packs(self.k_proj):
            return self._each(x, self.k_proj, self.v_proj)
        k, v = self._heads(F.linear(x, *packed_linear(self.k_proj, self.v_proj)), 2)
        return k, v

    def _each(self, x: Tensor, *layers: nn.Linear) -> tuple[Tensor, ...]:
        """`layers`' projections of `x` one by one, each split into heads (B, H, N, dh)."""
        return tuple(split_heads(layer(x), self.n_heads) for layer in layers)

    def project_q(self, x: Tensor) -> Tensor:
        return split_heads(self.q_proj(x), self.n_heads)

    def forward(self, q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, need_weights: bool = False,
                bias: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Attend from projected queries `q` (B, H, Q, dh) to keys/values; `mask` is True where allowed (None: all),
        `bias` (1, H, Q, K) is added to the scores (T5's relative positions). Returns the output (B, Q, D) and, when
        `need_weights`, the weights (B, H, Q, K) it was computed with."""
        hooks = self.hooks
        if hooks.listeners:
            q, keys, values = hooks.at(Q, q), hooks.at(K, keys), hooks.at(V, values)
            mask, bias = hooks.at(MASK, mask), hooks.at(BIAS, bias)
        out, weights = self.attend(q, keys, values, mask, need_weights, bias)
        b, h, n, dh = out.shape
        result = self.project_out(out.transpose(1, 2).reshape(b, n, h * dh))  # heads side by side (B, Q, H*dh)
        return (hooks.at(RESULT, result) if hooks.listeners else result), weights

    def project_out(self, z: Tensor) -> Tensor:
        """W_O over the heads laid side by side (..., H*dh), which pass the Z hook point first: a head a listener
        zeroes there (head_gate.py) adds nothing, also to a caller that projects heads on its own (norms.py)."""
        return self.out_proj(self.hooks.at(Z, z))

    def attend(self, q: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, need_weights: bool,
               bias: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """softmax(q kᵀ / √d_k + bias) v per head, (B, H, Q, dh), and the weights when they are made."""
        p = self.dropout if self.training else 0.0
        hooks = self.hooks
        scores_hooked, pattern_hooked = hooks.hears(SCORES), hooks.hears(PATTERN)
        if not (need_weights or scores_hooked or pattern_hooked or (p and q.device.type == "cpu")):
            allowed = mask if bias is None else bias if mask is None else bias.masked_fill(~mask, float("-inf"))
            return F.scaled_dot_product_attention(q, keys, values, attn_mask=allowed, dropout_p=p,
                                                  scale=None if self.scale_scores else 1.0), None
        b, h, n, dh = q.shape
        # The heads stay one batch axis (B*H) from the first product to the last and the scale is applied inside
        # the first: recording runs this 8 times a decoding step, where each kernel and view costs what these
        # small products do.
        scores = torch.baddbmm(_zero(q), q.reshape(b * h, n, dh), keys.reshape(b * h, -1, dh).mT, beta=0,
                               alpha=dh ** -0.5 if self.scale_scores else 1.0)  # (B*H, Q, K)
        if mask is not None or bias is not None or scores_hooked:
            shaped = scores.view(b, h, n, -1)
            if bias is not None:
                shaped = shaped + bias
            if mask is not None:
                shaped = shaped.masked_fill(~mask, float("-inf"))
            scores = (hooks.at(SCORES, shaped) if scores_hooked else shaped).reshape(b * h, n, -1)
        weights = scores.softmax(-1)
        shaped = hooks.at(PATTERN, weights.view(b, h, n, -1)) if pattern_hooked else weights.view(b, h, n, -1)
        weights = shaped.reshape(b * h, n, -1) if pattern_hooked else weights
        out = torch.bmm(dropout(weights, p, True), values.reshape(b * h, -1, dh)).view(b, h, n, dh)
        return out, shaped if need_weights else None


_ZEROS: dict[tuple[torch.dtype, torch.device], Tensor] = {}


def _zero(like: Tensor) -> Tensor:
    """A 0-d zero of `like`'s dtype and device (baddbmm's ignored addend), made once."""
    zero = _ZEROS.get((like.dtype, like.device))
    if zero is None:
        with torch.inference_mode(False):  # a plain tensor, also when first made while decoding in inference mode
            zero = _ZEROS[(like.dtype, like.device)] = torch.zeros((), dtype=like.dtype, device=like.device)
    return zero
