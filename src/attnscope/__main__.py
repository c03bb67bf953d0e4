"""`python -m attnscope COMMAND`: translate a sentence, or train, evaluate, average, fetch data and import a model.

`translate` is defined here; the other commands are the `main()` of the module that does the work.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Sequence

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.engine.decoding.loading import load
from attnscope.engine.decoding.translator import InputError, Translation

# Commands whose arguments the named module's main(argv) parses.
DELEGATED = {"train": "attnscope.training.loop", "evaluate": "attnscope.training.evaluate",
             "average": "attnscope.checkpoints.average", "data": "attnscope.training.data",
             "import": "attnscope.checkpoints.import_command", "bench": "attnscope.bench.__main__"}


def steps_json(result: Translation) -> list[dict[str, object]]:
    return [{"step": s.index, "token": s.token, "token_id": s.token_id, "prob": round(s.prob, 6),
             "entropy": round(s.entropy, 6), "top_k": [[t, round(p, 6)] for t, p in s.top_k]}
            for s in result.steps or []]


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in DELEGATED:
        importlib.import_module(DELEGATED[args_list[0]]).main(args_list[1:])
        return 0
    parser = argparse.ArgumentParser(prog="python -m attnscope", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in DELEGATED.items():
        sub.add_parser(name, help=f"see python -m attnscope {name} --help ({module})", add_help=False)
    tr = sub.add_parser("translate", help="translate one sentence")
    tr.add_argument("text")
    tr.add_argument("--checkpoint", default=None, help="checkpoint file (default: shipped en->de)")
    tr.add_argument("--beam", type=int, default=1)
    tr.add_argument("--max-len", type=int, default=None)
    tr.add_argument("--json", type=Path, default=None, help="write tokens, steps and attention as JSON")
    tr.add_argument("--npz", type=Path, default=None, help="write the attention record as NPZ")
    args = parser.parse_args(args_list)
    try:
        translator = load(args.checkpoint)
        result = translator.translate(args.text, beam_size=args.beam, max_len=args.max_len)
    except (CheckpointError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(result.text)
    settings = {"checkpoint": translator.name, "sentence": args.text, "beam": args.beam, "max_len": args.max_len}
    if args.json and result.attention is not None:
        payload = json.loads(result.attention.to_json(settings))
        payload.update(translation=result.text, steps=steps_json(result))
        args.json.write_text(json.dumps(payload))
    if args.npz and result.attention is not None:
        args.npz.write_bytes(result.attention.to_npz(settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
