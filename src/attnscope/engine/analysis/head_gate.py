"""Head ablation as a scoped listener: `with gate_heads(model, heads): ...` runs the model with those heads off.

A head is switched off by zeroing its output in the heads laid side by side (the attention's Z hook point,
model/hooks.py) before the output projection. Like the recorder, the listeners exist only inside the block, are
removed on leaving it, hear only calls from the thread that opened the block, and the model's lock is held
throughout, so no other session ever runs the gated model and nothing is left on the shared modules afterwards.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Iterable, Iterator

import torch
from torch import Tensor

from attnscope.model.attention import MultiHeadAttention
from attnscope.model.hooks import Z
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


def _gated(n_heads: int, off: list[int], z: Tensor) -> Tensor:
    """z (B, Q, H*dh) with heads `off` zeroed: head h is columns h*dh .. (h+1)*dh."""
    keep = torch.ones(n_heads, dtype=z.dtype, device=z.device)
    keep[off] = 0.0
    return z * keep.repeat_interleave(z.shape[-1] // n_heads)


@contextmanager
def gate_heads(model: Transformer, heads: Iterable[HeadKey]) -> Iterator[None]:
    """Run the block with `heads` (kind, layer, head) contributing nothing to their layer's output."""
    chosen = _heads_of(model, heads)
    with ExitStack() as listening:  # the translations run under it take the model's lock
        for module, off in chosen.items():
            module.hooks.listen(listening, Z, partial(_gated, module.n_heads, off))
        yield
