"""Bench of the Step page's contrast (issue 46): one step's contrastive attributions, every contrastive method in the
registry (gradient × input, integrated gradients at the page's defaults), on the shipped model and on a model of
opus-mt-en-de's shape (random weights), each figure with the machine's load beside it."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from attnscope.bench.measure import first_fastest_median, timed_runs
from attnscope.engine.attribution.contrastive import CONTRASTIVE_INTEGRATED, Contrast
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.sentence import contrast_attribute
from attnscope.engine.decoding.translator import Translator


def contrast_step(tr: Translator, text: str, max_len: int | None, repeats: int, model: str) -> dict[str, Any]:
    """Seconds of every contrastive method at the middle step of `text`'s translation against its top rival: the
    first run, then the fastest and median of `repeats`, wall and CPU (the CPU seconds are what a quiet machine would
    take at one thread), each with the 1-minute load average."""
    result = tr.translate(text, max_len=max_len)
    t = len(result.steps) // 2
    contrast = Contrast(t, next(i for i in result.steps[t].top_ids if i != result.target_ids[t]))
    runs = timed_runs(lambda: contrast_attribute(tr, result, contrast, IGSettings()), repeats)
    ig = runs[-1][3][CONTRASTIVE_INTEGRATED]
    return {"model": model, "tokens (source x target)": f"{len(result.source_ids)} x {len(result.target_ids)}",
            "step": t, "torch threads / cores": f"{torch.get_num_threads()} / {os.cpu_count()}",
            "IG path points": ig.points, "IG relative gap": float(f"{ig.relative_gap[0]:.2g}"),
            **first_fastest_median(runs)}


def contrast_bench(tr: Translator, shape: str, repeats: int) -> list[dict[str, Any]]:
    """contrast_step on the given translator (the shipped model) and on a random model of `shape`, its translation
    cut at TYPICAL tokens as the other rows of imported shapes are (random weights never end by themselves)."""
    from attnscope.bench.imported_shapes import TYPICAL, shaped_checkpoint
    from attnscope.bench.measure import SENTENCES
    from attnscope.checkpoints import checkpoint

    words = " ".join(SENTENCES).replace(".", " .").split()
    shaped = Translator(*checkpoint.load(shaped_checkpoint(shape, Path(tempfile.mkdtemp()), words)))
    return [contrast_step(tr, SENTENCES[0], None, repeats, "shipped"),
            contrast_step(shaped, SENTENCES[0], TYPICAL, repeats, shape)]
