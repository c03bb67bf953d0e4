"""`python -m attnscope evaluate`: corpus BLEU and chrF of a checkpoint on Multi30k splits, one JSON line per split and beam."""
from __future__ import annotations

import argparse
import json
from typing import Sequence


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnscope evaluate", description=__doc__)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--split", action="append", help="split name (repeatable); default test_2016_flickr")
    p.add_argument("--beam", type=int, action="append", help="beam size (repeatable); default 1")
    p.add_argument("--data-dir", default=None, help="Multi30k directory (default $ATTNSCOPE_DATA)")
    p.add_argument("--device", default="auto")
    p.add_argument("--markdown", action="store_true", help="also print the results as one Markdown table")
    return p


def main(argv: Sequence[str]) -> int:
    from attnscope.training.evaluate import evaluate_splits, markdown_table

    args = parser().parse_args(argv)
    results = []
    for result in evaluate_splits(args.checkpoint, args.split or ["test_2016_flickr"], args.beam or [1],
                                  args.data_dir, args.device):
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.markdown:
        print(markdown_table(results))
    return 0
