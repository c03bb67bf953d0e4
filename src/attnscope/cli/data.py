"""`python -m attnscope data download [--data-dir D]`: fetch Multi30k, for users with internet."""
from __future__ import annotations

import argparse
from typing import Sequence


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnscope data", description=__doc__)
    p.add_argument("command", choices=["download"])
    p.add_argument("--data-dir", default=None, help="where to put it (default $ATTNSCOPE_DATA)")
    return p


def main(argv: Sequence[str]) -> int:
    from attnscope.training.data import data_dir, download

    args = parser().parse_args(argv)
    for path in download(data_dir(args.data_dir)):
        print(f"fetched {path}")
    return 0
