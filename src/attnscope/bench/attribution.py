"""Attribution section of the benchmarks: whether integrated gradients add up at the default settings, at
what cost, the source/prefix split by target position (ALTI+ against value zeroing's rollout), and the time
of the Attribution page's methods tab."""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from attnscope.bench.measure import first_fastest_median, timed_runs
from attnscope.engine.analysis.dataset import shares_by_position
from attnscope.engine.attribution.contributions import Contributions
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.saliency import translation_saliency
from attnscope.engine.attribution.sentence import SentenceAttribution, attribute, exact_contributions
from attnscope.engine.decoding.translator import Translation, Translator

SPLIT_POSITIONS = (0, 1, 2, 4, 6, 8, 10, 12, 14, 16, 18)  # target positions reported (0 = first generated token)


def ig_completeness(tr: Translator, texts: Sequence[str], settings: IGSettings | None = None) -> dict[str, Any]:
    """Integrated gradients of each greedy translation at `settings` (None: the defaults): every token's
    completeness gap (|sum of attributions − (f(x) − f(baseline))|, relative to the change), path points and seconds."""
    settings = settings or IGSettings()
    relative, gaps, changes, complete, points, seconds = [], [], [], [], [], []
    for text in texts:
        result = tr.translate(text)
        start = time.perf_counter()
        ig = translation_saliency(tr, result, settings)
        seconds.append(time.perf_counter() - start)
        relative += list(ig.relative_gap)
        gaps += list(ig.gap)
        changes += list(np.abs(ig.score - ig.baseline_score))
        complete += list(ig.complete)
        points.append(ig.points)
    rel, gap, small = np.asarray(relative), np.asarray(gaps), np.asarray(changes) < settings.floor
    return {"sentences": len(texts), "tokens": len(rel), "tolerance": settings.tolerance,
            "max_points": settings.max_points, "tokens_within_tolerance": f"{int(np.sum(complete))}/{len(rel)}",
            "relative_gap_median": round(float(np.median(rel)), 4), "relative_gap_p95": round(float(np.quantile(rel, 0.95)), 4),
            "relative_gap_max": round(float(rel.max()), 4),
            "relative_gap_max (changes of 1 nat or more)": round(float(rel[~small].max(initial=0.0)), 4),
            "tokens changing under 1 nat": int(small.sum()),
            "their largest gap (nats)": round(float(gap[small].max(initial=0.0)), 4),
            "path_points_median": statistics.median(points), "path_points_max": max(points),
            "seconds_per_sentence_median": round(statistics.median(seconds), 3),
            "seconds_per_sentence_max": round(max(seconds), 3)}


def split_by_position(tr: Translator, texts: Sequence[str]) -> list[dict[str, Any]]:
    """Mean source share at chosen target positions over `texts`, ALTI+ and value zeroing, plus every token."""
    shares = shares_by_position(tr, texts)
    rows = [{"position": t + 1, "tokens": int(shares.counts[t]),
             **{m: round(float(v[t]), 3) for m, v in shares.mean.items()}}
            for t in SPLIT_POSITIONS if t < len(shares.counts)]
    return rows + [{"position": "all", "tokens": int(shares.counts.sum()),
                    **{m: round(shares.overall(m), 3) for m in shares.mean}}]


def _timed_stages(tr: Translator, result: Translation, settings: IGSettings,
                  exact: tuple[Contributions, Contributions] | None = None) -> tuple[SentenceAttribution, dict[str, float]]:
    """One attribution and the seconds of each of its stages, told apart by its progress (integrated
    gradients' rounds together)."""
    starts: dict[str, float] = {}

    def heard(what: str, _done: float) -> None:
        starts.setdefault(what.split(":")[0], time.perf_counter())

    att = attribute(tr, result, settings, heard, exact)
    ends = [*list(starts.values())[1:], time.perf_counter()]
    return att, {what: end - start for (what, start), end in zip(starts.items(), ends)}


def methods_tab(tr: Translator, text: str, max_len: int, repeats: int) -> list[dict[str, Any]]:
    """Seconds of the Attribution page's "Source tokens by method" tab on one translation (every attribution,
    integrated gradients at the page's defaults), opened first and after the split tab (whose ALTI+ and value
    zeroing it reuses): the first run, then the fastest and median of `repeats`, wall and CPU (one thread: the
    CPU seconds are what a quiet machine would take), each with the load average (1 min) beside it since the
    machine may be shared; and each stage's seconds in the fastest run."""
    result = tr.translate(text, max_len=max_len)
    settings, exact = IGSettings(), exact_contributions(tr, result)
    rows = []
    for name, given in (("opened first", None), ("after the split tab", exact)):
        runs = timed_runs(lambda given=given: _timed_stages(tr, result, settings, given), repeats)
        ig = runs[-1][3][0].integrated_gradients
        fastest = min(runs[1:], key=lambda r: r[0])
        rows.append({"tab": name, "tokens (source x target)": f"{len(result.source_ids)} x {len(result.target_ids)}",
                     "torch threads / cores": f"{torch.get_num_threads()} / {os.cpu_count()}",
                     "IG path points": ig.points if ig else None,
                     "IG largest relative gap": float(f"{ig.relative_gap.max():.2g}") if ig else None,
                     **first_fastest_median(runs),
                     **{f"fastest: {what} s": round(seconds, 2) for what, seconds in fastest[3][1].items()}})
    return rows


def methods_tab_of_shape(name: str, repeats: int) -> list[dict[str, Any]]:
    """methods_tab on a random model of imported_shapes.SHAPES[name], its translation cut at TYPICAL tokens as the
    other rows of imported shapes are (random weights never end by themselves)."""
    import tempfile

    from attnscope.bench.imported_shapes import TYPICAL, shaped_checkpoint
    from attnscope.bench.measure import SENTENCES
    from attnscope.checkpoints import checkpoint

    words = " ".join(SENTENCES).replace(".", " .").split()
    tr = Translator(*checkpoint.load(shaped_checkpoint(name, Path(tempfile.mkdtemp()), words)))
    return [{"model": name, **row} for row in methods_tab(tr, SENTENCES[0], TYPICAL, repeats)]
