"""How much memory an allocation may take: checked before allocating, so that a hostile or careless file is refused
in one sentence within seconds instead of swapping the server out or dying of MemoryError minutes later."""
from __future__ import annotations

import os
from pathlib import Path

SHARE = 0.5  # of the memory available now: the app, the user's other models and the next request need the rest


def available_bytes() -> int:
    """Memory the machine can give without swapping (MemAvailable), or its free pages where /proc is absent."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 2**62  # unknown: the fixed limits still hold


def over_budget(nbytes: int, what: str) -> str | None:
    """A sentence refusing `what` when its `nbytes` exceed the budget; None when it fits."""
    budget = int(available_bytes() * SHARE)
    if nbytes <= budget:
        return None
    return (f"{what} would take {nbytes / 2**30:,.1f} GB of memory, more than the {budget / 2**30:,.1f} GB this machine "
            "can spare now (half of what it has available)")


HEADROOM = 1.25  # a model's float32 weights times this: its activations, the attention a page shows, the app itself
GB = 2**30


def model_bytes(elements: int, itemsize: int = 4) -> int:
    """Memory a model of `elements` numbers of `itemsize` bytes needs to run and show its attention (README, 'Big
    models')."""
    return int(elements * itemsize * HEADROOM)


def model_refusal(elements: int, what: str, itemsize: int = 4) -> str | None:
    """One sentence refusing `what`, a model of `elements` numbers (float32, or float64 with `itemsize` 8), when it
    would not fit in the memory available now (decided from its config or file header, before anything is
    allocated); None when it fits."""
    need, have = model_bytes(elements, itemsize), available_bytes()
    if need <= have:
        return None
    return (f"{what} has {elements:,} weights, which need about {need / GB:,.1f} GB of memory as float{8 * itemsize}, "
            f"more than the {have / GB:,.1f} GB this machine has available now: close other programs or models, or use "
            "a machine with more memory (README, 'Big models', lists the sizes that fit)")
