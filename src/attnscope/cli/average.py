"""`python -m attnscope average --out FILE CHECKPOINT...`: the mean of the weights of several checkpoints of one run
(the last few validation checkpoints usually gain BLEU together); with `--half` it writes the fp16 file we ship."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnscope average", description=__doc__)
    p.add_argument("checkpoints", nargs="+", type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--half", action="store_true", help="store in fp16 (for shipping)")
    p.add_argument("--set-summary", action="append", default=[], metavar="KEY=VALUE",
                   help="add a field to the training summary (e.g. test BLEU)")
    return p


def main(argv: Sequence[str]) -> int:
    from attnscope.checkpoints.average import save_average

    args = parser().parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.set_summary)
    path = save_average(args.checkpoints, args.out, half=args.half, summary=extra)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB) from {len(args.checkpoints)} checkpoints")
    return 0
