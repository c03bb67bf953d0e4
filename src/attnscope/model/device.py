"""Pick the compute device, how many CPU threads decode on it, and whether bf16 autocast pays off on it."""
from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import ContextManager, Literal, Mapping

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


THREADS_VARIABLE = "ATTNSCOPE_THREADS"


def policy_threads(environ: Mapping[str, str] = os.environ) -> int | None:
    """Intra-op threads attnscope runs torch with: ATTNSCOPE_THREADS when set (0: torch's own choice, None), else 1.

    One thread, because torch's threads wait for each other at the end of every kernel: on a 2-core machine
    whose other core is busy, two threads took 166-322 ms a token of an opus-mt-sized model against 24-28 ms
    with one. With a core to spare two are ~1.5x faster for that model: one thread bounds the worst case
    (BENCHMARKS.md, imported shapes and peers).
    """
    text = environ.get(THREADS_VARIABLE, "").strip()
    if not text:
        return 1
    if not text.isdigit():
        warnings.warn(f"{THREADS_VARIABLE}={text!r} is not a whole number of threads (0 keeps torch's own choice); "
                      "using 1", stacklevel=2)
        return 1
    return int(text) or None


def apply_thread_policy(environ: Mapping[str, str] = os.environ) -> int:
    """Set torch's intra-op threads for the whole process by `policy_threads`; return the count in force.

    Called where attnscope starts work for someone (the app's model loading, `attnscope.load`/`import_model`,
    the command line), not on import; training keeps its own `threads` setting.
    """
    wanted = policy_threads(environ)
    if wanted is not None and torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)
    return torch.get_num_threads()


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
