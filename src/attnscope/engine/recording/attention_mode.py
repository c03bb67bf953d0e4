"""Find attention in any module's forward: a TorchFunctionMode that sees every torch call of a recording.

Attention is recognised by what is computed, not by names:
- a softmax over the last axis of a product of two activations (q @ kᵀ, then scaled, masked or
  biased: `torch.softmax`, `F.softmax`, `Tensor.softmax`, `nn.Softmax`): its result is recorded
  as it is, the very tensor the user's code goes on with;
- a call of `F.scaled_dot_product_attention`: the fused call runs unchanged (its output is returned
  as it is, bit for bit) and the weights it implies are computed beside it (`sdpa_weights`).
Each is credited to the innermost module of the recorded model running at that moment (the
recorder keeps that stack with forward pre/post hooks), and marked self- or cross-attention by
whether its queries and keys share a stream (streams.py). Modules that the recorder reads through
their own hooks (nn.MultiheadAttention, attnscope's attention) are skipped here.

The mode is thread-local (torch keeps a mode stack per thread) and is pushed only inside
`record_attention`, so nothing outside a recording pays for it.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from attnscope.engine.recording.streams import Stream, Streams, tensors_in

SOFTMAX: frozenset[Callable[..., Any]] = frozenset({torch.softmax, F.softmax, Tensor.softmax})
PRODUCTS: frozenset[Callable[..., Any]] = frozenset(
    {torch.matmul, Tensor.matmul, Tensor.__matmul__, torch.bmm, Tensor.bmm, torch.einsum, torch.baddbmm,
     Tensor.baddbmm})
SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")

Keep = Callable[[str, Tensor, str, bool], None]  # (module name, weights [..., Q, K], "self" | "cross", rows reordered)


class AttentionMode(TorchFunctionMode):
    """Inside a recording: hands every attention computed by the model's own code to `keep`."""

    def __init__(self, streams: Streams, keep: Keep) -> None:
        super().__init__()
        self.streams, self.keep = streams, keep
        self.scores: WeakIdKeyDictionary = WeakIdKeyDictionary()  # q @ kᵀ (and its scaled/masked copies) -> streams
        self.running: list[tuple[str, bool]] = []  # (module name, read by its own hooks), innermost last
        self.problems: list[str] = []  # calls the recorder could not follow (the calls themselves ran as ever)

    def enter(self, name: str, hooked: bool) -> None:
        self.running.append((name, hooked))

    def leave(self) -> None:
        self.running.pop()

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        outputs = [out] if isinstance(out, Tensor) else tensors_in([out]) if isinstance(out, (tuple, list)) else []
        if not outputs and func is not Tensor.__setitem__:
            return out  # .shape, .size(), .item(), ...
        try:
            self._follow(func, args, kwargs, out, outputs)
        except Exception as err:  # the user's call has run: its result goes back whatever the recorder makes of it
            self.problems.append(f"{getattr(func, '__name__', func)}: {type(err).__name__}: {err}")
        return out

    def _follow(self, func: Callable[..., Any], args: tuple, kwargs: dict, out: Any, outputs: list[Tensor]) -> None:
        """Note what one call computed: attention it reveals, scores it carries, the streams of its results."""
        inputs = tensors_in([*args, *kwargs.values()])
        if func in SOFTMAX:
            self._softmax(args, kwargs, out)
        elif func is F.scaled_dot_product_attention:
            self._sdpa({**dict(zip(SDPA_ARGS, args)), **kwargs})
        elif func in PRODUCTS:
            self._product(func, args, outputs)
        else:
            self._carry_scores(inputs, outputs)
        self.streams.label(func, args, inputs, outputs)

    def _owner(self) -> str | None:
        """The module to credit: the innermost one running, unless a hooked module is running."""
        if not self.running or any(hooked for _, hooked in self.running):
            return None
        return self.running[-1][0]

    def _found(self, weights: Tensor, queries: Stream, keys: Stream) -> None:
        owner = self._owner()
        if owner is not None:
            self.keep(owner, weights.detach(), "self" if queries & keys else "cross", bool(keys & self.streams.reordered))

    def _product(self, func: Callable[..., Any], args: tuple, outputs: list[Tensor]) -> None:
        """Mark a product of two activations (queries x keysᵀ) as attention scores."""
        operands = tensors_in(args[1:] if func is torch.einsum else args)
        if func in (torch.baddbmm, Tensor.baddbmm):
            operands = operands[1:]  # baddbmm(bias, q, kᵀ)
        if len(operands) < 2 or len(outputs) != 1:
            return
        queries, keys = self.streams.of(operands[0]), self.streams.of(operands[1])
        if queries and keys and operands[0].dim() >= 2:
            self.scores[outputs[0]] = (queries, keys)

    def _carry_scores(self, inputs: list[Tensor], outputs: list[Tensor]) -> None:
        """Scaling, masking or adding a bias to scores gives scores (same shape, same streams)."""
        for t in inputs:
            found = self.scores.get(t)
            if found is not None:
                if len(outputs) == 1 and outputs[0].shape == t.shape:
                    self.scores[outputs[0]] = found
                return

    def _softmax(self, args: tuple, kwargs: dict, out: Tensor) -> None:
        x = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        found = self.scores.get(x)
        if found is not None and isinstance(dim, int) and x.dim() >= 2 and dim % x.dim() == x.dim() - 1:
            self._found(out, *found)

    def _sdpa(self, named: dict[str, Any]) -> None:
        query, key = named["query"], named["key"]
        if self._owner() is not None:
            self._found(sdpa_weights(query, key, named.get("attn_mask"), bool(named.get("is_causal", False)),
                                     named.get("scale"), bool(named.get("enable_gqa", False))),
                        self.streams.of(query), self.streams.of(key))


def sdpa_weights(query: Tensor, key: Tensor, attn_mask: Tensor | None = None, is_causal: bool = False,
                 scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """The attention weights [..., L, S] that `F.scaled_dot_product_attention` applies to its values.

    Computed in float64 (float32 where a device has none) and returned in float32: softmax(q kᵀ x scale
    + mask), with torch's conventions (a boolean mask is True where attending is allowed, is_causal is
    the lower triangle aligned top-left, enable_gqa shares each key head among query heads); rows
    with every key masked are zero, as in torch's math kernel. Dropout is not applied (weights before it).
    """
    wide = torch.float32 if query.device.type == "mps" else torch.float64
    q, k = query.detach().to(wide), key.detach().to(wide)
    if enable_gqa and k.dim() >= 3 and k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)  # (..., L, S)
    n_q, n_k = scores.shape[-2:]
    if is_causal:
        allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~allowed, -math.inf)
    if attn_mask is not None:
        mask = attn_mask.detach()
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask.to(wide)
    weights = scores.softmax(-1)
    weights = torch.where(torch.isneginf(scores).all(-1, keepdim=True), 0.0, weights)
    return weights.float()
