"""`python -m attnscope bench` (or `python -m attnscope.bench`): speed, memory and quality, measured side by side.

Every figure is a median over repetitions in one process, reported with the machine. Ratios
compare against an honest baseline run in the same process (nn.Transformer for training,
uncached decoding, capture off). `--tiny` runs everything on a tiny random model in seconds
(the test suite's smoke test); it proves the code runs, its numbers mean nothing.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

# The keys of bench.suite.run's sections, in the order they run.
SECTIONS = ("training", "decoding", "capture", "batch", "memory", "quality", "app", "import", "dataset", "toy", "inside",
            "ig", "split", "imported", "large", "app-memory", "peer", "peer-t5", "methods", "explorer",
            "atlas", "big", "contrast", "streaming", "sessions")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnscope.bench", description=__doc__)
    p.add_argument("--tiny", action="store_true", help="seconds-long smoke run on a random tiny model")
    p.add_argument("--out", type=Path, default=Path("bench-report.json"))
    p.add_argument("--checkpoint", type=Path, default=None, help="model for decoding/capture (default: shipped en->de)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: ATTNSCOPE_THREADS or 1)")
    p.add_argument("--skip", action="append", default=[], choices=SECTIONS, help="leave this section out")
    p.add_argument("--only", action="append", default=[], choices=SECTIONS, help="run only this section (repeatable)")
    return p


def main(argv: Sequence[str]) -> int:
    from attnscope.bench.suite import run

    args = parser().parse_args(argv)
    run(args.out, tiny=args.tiny, checkpoint_path=args.checkpoint, threads=args.threads, skip=args.skip, only=args.only)
    return 0
