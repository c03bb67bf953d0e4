"""Whether weights are finite, and whether fp16 storage would keep them so: checked where weights enter a checkpoint
(an import, a save), so loading need not read them twice.

Each check is one vectorised pass over a tensor without a mask as large as it: on one thread a 2.3 GB model's sums
take ~0.35 s of CPU, their smallest and largest values ~0.5 s, and torch.isfinite(t).all() ~4.5 s (it writes a
boolean per weight first).
"""
from __future__ import annotations

import torch

FP16_MAX = torch.finfo(torch.float16).max  # 65,504: larger weights become infinite in fp16


def all_finite(tensor: torch.Tensor) -> bool:
    """Whether a tensor holds no NaN and no infinity. A NaN or an infinity makes the sum NaN or infinite, so a finite
    sum proves every value finite; a sum that is not finite (a NaN, an infinity, or finite values whose sum
    overflows) is settled by the smallest and largest values (NaN propagates to both)."""
    if not tensor.is_floating_point() or not tensor.numel():
        return True
    tensor = tensor.detach()
    if torch.isfinite(tensor.sum()):
        return True
    low, high = torch.aminmax(tensor)
    return bool(torch.isfinite(low) & torch.isfinite(high))


def first_not_finite(tensors: dict[str, torch.Tensor]) -> str | None:
    """The name of the first floating-point tensor holding NaN or an infinity, or None."""
    return next((k for k, t in tensors.items() if not all_finite(t)), None)


def half_overflow(state: dict[str, torch.Tensor]) -> str | None:
    """A sentence when fp16 storage would make weights of `state` infinite (|w| > 65,504), else None; the weights
    beyond are counted only in a tensor whose smallest or largest value is."""
    bad = {}
    for name, tensor in state.items():
        if tensor.is_floating_point() and tensor.numel():
            low, high = torch.aminmax(tensor.detach())
            if low < -FP16_MAX or high > FP16_MAX:
                bad[name] = int((tensor.detach().abs() > FP16_MAX).sum())
    if not bad:
        return None
    return (f"fp16 storage would make {sum(bad.values()):,} weights infinite (beyond ±{FP16_MAX:,.0f}, first in "
            f"{next(iter(bad))}): store the model in fp32 (leave out --half, or half=False)")
