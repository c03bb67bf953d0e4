"""`python -m attnscope COMMAND`: translate a sentence, or train, evaluate, average, fetch data, import a model, bench.

Each command is a module of attnscope.cli (its arguments: `python -m attnscope COMMAND --help`).
"""
from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import Sequence

from attnscope.cli import average, bench, data, evaluate, import_model, train, translate
from attnscope.model.device import apply_thread_policy

COMMANDS: dict[str, ModuleType] = {"translate": translate, "train": train, "evaluate": evaluate, "average": average,
                                   "data": data, "import": import_model, "bench": bench}
OWN_THREADS = {"train", "bench"}  # they take --threads; every other command: the thread policy (docs/design.md)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command named first in `argv` (default: the process's arguments) and return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        if args[0] not in OWN_THREADS:
            apply_thread_policy()
        return COMMANDS[args[0]].main(args[1:])
    parser = argparse.ArgumentParser(prog="python -m attnscope", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        sub.add_parser(name, help=(module.__doc__ or "").splitlines()[0].split(": ", 1)[-1], add_help=False)
    parser.parse_args(args)  # no command: argparse prints the usage and exits
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
