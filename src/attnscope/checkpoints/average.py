"""Average the weights of several checkpoints of one run (`python -m attnscope average`).

Averaging the last few validation checkpoints smooths out the noise of the final updates
and usually gains BLEU on small corpora; with `--half` it also writes the fp16 file we ship.
"""
from __future__ import annotations

import argparse
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
    return model, Bundle(bundle.config, bundle.src_codec, bundle.tgt_codec, bundle.src_lang, bundle.tgt_lang, summary)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m attnscope average", description=__doc__)
    parser.add_argument("checkpoints", nargs="+", type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--half", action="store_true", help="store in fp16 (for shipping)")
    parser.add_argument("--set-summary", action="append", default=[], metavar="KEY=VALUE",
                        help="add a field to the training summary (e.g. test BLEU)")
    args = parser.parse_args(argv)
    model, bundle = average(args.checkpoints)
    extra = dict(item.split("=", 1) for item in args.set_summary)
    bundle = Bundle(bundle.config, bundle.src_codec, bundle.tgt_codec, bundle.src_lang, bundle.tgt_lang,
                    {**bundle.summary, **extra})
    checkpoint.save(model, bundle, args.out, half=args.half)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB) from {len(args.checkpoints)} checkpoints")
