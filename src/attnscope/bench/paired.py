"""Two contenders timed in interleaved pairs: the median of the pairs' ratios and its middle half.

On a shared machine a contender's time moves by +-40% between runs; within a back-to-back pair, whose order
alternates, a change in the machine's speed hits both halves alike, so the ratios are steadier than the times.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence


def ratio_summary(ratios: Sequence[float]) -> tuple[float, list[float]]:
    """The median ratio and the middle half of the ratios (first and third quartiles), rounded."""
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return round(statistics.median(ratios), 3), [round(q[0], 3), round(q[2], 3)]


def paired(ours: Callable[[], Any], theirs: Callable[[], Any], pairs: int,
           settings: tuple[Callable[[], None], Callable[[], None]]) -> dict[str, Any]:
    """Ratio ours/theirs over `pairs` interleaved pairs after one warm-up pair, and each side's median (ms).
    `settings` run before each side (its thread count, say)."""
    ratios, mine, peer = [], [], []
    for i in range(pairs + 1):
        times = {}
        for name in (("ours", "theirs") if i % 2 else ("theirs", "ours")):
            settings[name == "theirs"]()
            start = time.perf_counter()
            (ours if name == "ours" else theirs)()
            times[name] = time.perf_counter() - start
        if i:  # the first pair warms both up
            ratios.append(times["ours"] / times["theirs"])
            mine.append(times["ours"])
            peer.append(times["theirs"])
    median, middle = ratio_summary(ratios)
    return {"ratio (median)": median, "ratio middle half": middle,
            "attnscope ms": round(1e3 * statistics.median(mine)), "Hugging Face ms": round(1e3 * statistics.median(peer))}
