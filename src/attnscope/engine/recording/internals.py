"""A trace of one teacher-forced forward pass: each layer's input and output, and each attention
call's weights, keys, values and output, exactly as the model computed them.

Attribution methods (norm-based attention, value zeroing) read values and outputs that the
plain recorder does not keep. Hooks live only inside `trace()` and are removed in `finally`,
so ordinary capture stays as it was for users who never ask for attribution.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import Tensor, nn

from attnscope.engine.recording.capture import eval_mode, model_lock
from attnscope.model.config import BOS_ID
from attnscope.model.transformer import DecoderLayer, EncoderLayer, MultiHeadAttention, Transformer


@dataclass
class AttentionCall:
    """What one attention module read and wrote in one call."""

    module: MultiHeadAttention
    weights: Tensor  # (B, H, Q, K) after the softmax
    keys: Tensor  # (B, H, K, dh)
    values: Tensor  # (B, H, K, dh)
    mask: Tensor | None  # True where allowed, broadcastable to (B, H, Q, K)
    output: Tensor  # (B, Q, D) after the output projection


@dataclass
class LayerTrace:
    """One encoder or decoder layer: its input and output, and its attention calls."""

    layer: nn.Module
    inputs: Tensor  # (B, N, D)
    output: Tensor  # (B, N, D)
    self_attn: AttentionCall
    cross_attn: AttentionCall | None  # decoder layers only


@dataclass
class Trace:
    """Every layer of one forward pass, encoder first, plus the output logits."""

    encoder: list[LayerTrace]
    decoder: list[LayerTrace]
    logits: Tensor  # (B, T, V)


def decoder_inputs(target_ids: Sequence[int]) -> list[int]:
    """<bos> y1 .. y_{T-1}: what the decoder reads while choosing y1 .. yT."""
    return [BOS_ID, *list(target_ids)[:-1]]


def trace(model: Transformer, src: Tensor, tgt_in: Tensor) -> Trace:
    """Run `model(src, tgt_in)` once with hooks that keep every layer's internals (B, N, D tensors)."""
    calls: dict[nn.Module, dict[str, Any]] = {}
    layers: dict[nn.Module, tuple[Tensor, Tensor]] = {}

    def keep_weights(owner: MultiHeadAttention) -> Callable[..., None]:
        def keep(_m: nn.Module, _i: tuple[Any, ...], out: Tensor) -> None:
            calls.setdefault(owner, {})["weights"] = out.detach()  # (B, H, Q, K)
        return keep

    def keep_call(m: nn.Module, args: tuple[Any, ...], out: Tensor) -> None:
        _q, keys, values, mask = args
        calls.setdefault(m, {}).update(keys=keys.detach(), values=values.detach(), mask=mask, output=out.detach())

    def keep_layer(m: nn.Module, args: tuple[Any, ...], out: Tensor) -> None:
        layers[m] = (args[0].detach(), out.detach())

    with model_lock(model), eval_mode(model), torch.no_grad(), ExitStack() as stack:
        for m in model.modules():
            if isinstance(m, MultiHeadAttention):
                stack.callback(m.hook_pattern.register_forward_hook(keep_weights(m)).remove)
                stack.callback(m.register_forward_hook(keep_call).remove)
            elif isinstance(m, (EncoderLayer, DecoderLayer)):
                stack.callback(m.register_forward_hook(keep_layer).remove)
        logits = model(src, tgt_in)

    def layer_trace(layer: nn.Module) -> LayerTrace:
        cross = getattr(layer, "cross_attn", None)
        inputs, output = layers[layer]
        return LayerTrace(layer, inputs, output, AttentionCall(layer.self_attn, **calls[layer.self_attn]),
                          None if cross is None else AttentionCall(cross, **calls[cross]))

    return Trace([layer_trace(m) for m in model.encoder], [layer_trace(m) for m in model.decoder], logits.detach())


def trace_pair(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int]) -> Trace:
    """Trace of one source (ids with <eos>) teacher-forced on its generated target ids."""
    device = next(model.parameters()).device
    src = torch.tensor([list(src_ids)], dtype=torch.long, device=device)
    tgt_in = torch.tensor([decoder_inputs(target_ids)], dtype=torch.long, device=device)
    return trace(model, src, tgt_in)


def head_vectors(call: AttentionCall) -> Tensor:
    """f_h(x_j): each key's value pushed through its head's slice of W_O, (B, H, K, D).

    The attention output is sum_h sum_j a^h_ij f_h(x_j) + b_O, so these are the vectors the
    weights actually mix (Kobayashi et al. 2020, eq. 6). They come from the module's own output
    projection (each head's values alone in its slot, minus the bias), so a head switched off by
    `head_gate.gate_heads` contributes zero vectors here too.
    """
    m = call.module
    b, h, k, dh = call.values.shape
    eye = torch.eye(h, dtype=call.values.dtype, device=call.values.device)
    alone = torch.einsum("bhkd,hg->bhkgd", call.values, eye).reshape(b, h, k, h * dh)  # head h's values in slot h
    with torch.no_grad():
        return m.out_proj(alone) - m.out_proj.bias  # (B, H, K, D)


def mixed_vectors(call: AttentionCall, batch: int = 0) -> Tensor:
    """g_ij = sum_h a^h_ij f_h(x_j): what key j adds to query i's attention output, (Q, K, D)."""
    return torch.einsum("hqk,hkd->qkd", call.weights[batch], head_vectors(call)[batch])
