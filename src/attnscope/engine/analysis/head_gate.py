"""Head ablation as a scoped hook: `with gate_heads(model, heads): ...` runs the model with those heads off.

A head is switched off by zeroing its output (its slice of the heads laid side by side, the input
of the attention module's `out_proj`) before the output projection. Like the recorder, the hooks
exist only inside the block, are removed in `finally`, act only on calls from the thread that
opened the block, and the model's lock is held throughout, so no other session ever runs the
gated model and nothing is left on the shared modules afterwards.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import torch
from torch import Tensor, nn

from attnscope.model.attention import MultiHeadAttention
from attnscope.model.kinds import Kind
from attnscope.model.transformer import Transformer

HeadKey = tuple[Kind, int, int]  # (kind, layer, head)


def _heads_of(model: Transformer, heads: Iterable[HeadKey]) -> dict[MultiHeadAttention, list[int]]:
    """The heads to switch off, by module; a clear error for a head the model does not have."""
    groups = model.attention_by_kind()
    chosen: dict[MultiHeadAttention, list[int]] = {}
    for kind, layer, head in heads:
        modules = list(groups.get(kind, {}).values())
        if not (0 <= layer < len(modules) and 0 <= head < model.config.n_heads):
            raise ValueError(f"there is no {kind} layer {layer} head {head} in this model "
                             f"({len(modules)} {kind} layers of {model.config.n_heads} heads)")
        chosen.setdefault(modules[layer], []).append(head)
    return chosen


@contextmanager
def gate_heads(model: Transformer, heads: Iterable[HeadKey]) -> Iterator[None]:
    """Run the block with `heads` (kind, layer, head) contributing nothing to their layer's output."""
    me = threading.get_ident()
    handles: list[torch.utils.hooks.RemovableHandle] = []

    def pre_hook(module: nn.Linear, args: tuple[Any, ...], off: Tensor) -> tuple[Tensor]:
        x = args[0]  # (B, Q, H*dh): head h is columns h*dh .. (h+1)*dh
        return (x * off.to(x.dtype),) if threading.get_ident() == me else (x,)

    chosen = _heads_of(model, heads)
    try:  # the hooks act on this thread's calls only: the translations run under it take the model's lock
        for module, off in chosen.items():
            keep = torch.ones(module.n_heads, device=module.out_proj.weight.device)
            keep[off] = 0.0
            columns = keep.repeat_interleave(module.out_proj.in_features // module.n_heads)  # (H*dh,)
            handles.append(module.out_proj.register_forward_pre_hook(
                lambda m, args, columns=columns: pre_hook(m, args, columns)))
        yield
    finally:
        for handle in handles:
            handle.remove()
