"""Pick the compute device and whether bf16 autocast pays off on it."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import ContextManager, Literal

import torch

Precision = Literal["auto", "fp32", "bf16"]


def pick_device(requested: str | None = None) -> torch.device:
    """CUDA when present, else Apple MPS, else the CPU (or what the user asked for)."""
    if requested and requested != "auto":
        return torch.device(requested)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def cpu_has_fast_bf16() -> bool:
    """bf16 is only faster than fp32 on CPUs with avx512_bf16 or AMX; elsewhere it is slower."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(flag in flags for flag in ("avx512_bf16", "amx_bf16"))


def autocast_dtype(device: torch.device, precision: Precision = "auto") -> torch.dtype | None:
    """The autocast dtype to train with, or None for plain fp32."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    if device.type == "cpu" and cpu_has_fast_bf16():
        return torch.bfloat16
    return None


def autocast(device: torch.device, dtype: torch.dtype | None) -> ContextManager[object]:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
