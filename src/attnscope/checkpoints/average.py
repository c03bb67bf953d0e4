"""Average the weights of several checkpoints of one run (`python -m attnscope average`).

Averaging the last few validation checkpoints smooths out the noise of the final updates
and usually gains BLEU on small corpora; with `--half` it also writes the fp16 file we ship.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

import torch

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import Bundle, CheckpointError
from attnscope.model.transformer import Transformer


def _codecs(bundle: Bundle) -> list[tuple[str, object]]:
    return [(c.to_json(), c.id_map) for c in (bundle.src_codec, bundle.tgt_codec)]


def average(paths: Sequence[Path]) -> tuple[Transformer, Bundle]:
    """Mean of the weights of `paths`, which must share config and tokenizers."""
    if not paths:
        raise CheckpointError("give at least one checkpoint to average")
    model, bundle = checkpoint.load(paths[0])
    total = {k: v.clone().double() for k, v in checkpoint.unique_state(model).items()}
    for path in paths[1:]:
        other, other_bundle = checkpoint.load(path)
        if (other_bundle.config, _codecs(other_bundle)) != (bundle.config, _codecs(bundle)):
            raise CheckpointError(f"{path.name} has a different config or tokenizer than {paths[0].name}")
        for k, v in checkpoint.unique_state(other).items():
            total[k] += v.double()
        bundle = other_bundle  # keep the newest summary
    with torch.no_grad():
        for k, v in checkpoint.unique_state(model).items():
            v.copy_(total[k] / len(paths))
    summary = dict(bundle.summary, averaged_from=[p.name for p in paths])
    return model, dataclasses.replace(bundle, summary=summary)  # its task prefix too


def save_average(paths: Sequence[Path], out: Path, half: bool = False, summary: dict[str, str] | None = None) -> Path:
    """Write the mean of `paths` to `out` (fp16 with `half`), its training summary extended by `summary`."""
    model, bundle = average(paths)
    bundle = dataclasses.replace(bundle, summary={**bundle.summary, **(summary or {})})
    return checkpoint.save(model, bundle, out, half=half)
