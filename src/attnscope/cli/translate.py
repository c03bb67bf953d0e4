"""`python -m attnscope translate TEXT`: print the translation; --json / --npz write the attention it was made with."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m attnscope translate", description=__doc__)
    p.add_argument("text")
    p.add_argument("--checkpoint", default=None, help="checkpoint file (default: shipped en->de)")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--max-len", type=int, default=None)
    p.add_argument("--rules", choices=("model", "attnscope"), default="model",
                   help="decoding rules: the model's (those of the framework it was imported from: OpenNMT-py's or "
                        "fairseq's defaults, or its generation_config; attnscope's for a model trained here) or attnscope's own")
    p.add_argument("--task-prefix", default=None, help="text put before the sentence (default: the checkpoint's, e.g. "
                                                       "a T5's \"translate English to German: \"; \"\" for none)")
    p.add_argument("--json", type=Path, default=None, help="write tokens, steps and attention as JSON")
    p.add_argument("--npz", type=Path, default=None, help="write the attention record as NPZ")
    return p


def main(argv: Sequence[str]) -> int:
    """Exit code 2 with one line on stderr when the checkpoint or the text is unusable."""
    from attnscope.checkpoints.checkpoint import CheckpointError
    from attnscope.engine.decoding.loading import load
    from attnscope.engine.decoding.translation_files import translation_json
    from attnscope.engine.decoding.translator import InputError
    from attnscope.engine.recording.record_files import OUTPUT_TOKENS

    args = parser().parse_args(argv)
    try:
        translator = load(args.checkpoint, rules=args.rules)
        result = translator.translate(args.text, beam_size=args.beam, max_len=args.max_len, task_prefix=args.task_prefix)
    except (CheckpointError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if translator.rules.name != "attnscope":  # an imported model: say whose rules it decoded by, and the other choice
        print(f"note: {translator.rules.sentence()} (--rules attnscope for attnscope's own)", file=sys.stderr)
    prefix = translator.bundle.task_prefix if args.task_prefix is None else args.task_prefix
    if prefix:
        print(f"note: the model read {prefix!r} before the sentence (--task-prefix changes it)", file=sys.stderr)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(result.text)
    settings = {"checkpoint": translator.name, "sentence": args.text, "beam": args.beam, "max_len": args.max_len,
                "rules": translator.rules.name, **({"task_prefix": prefix} if prefix else {})}
    if args.json and result.attention is not None:
        args.json.write_text(translation_json(result, settings))
    if args.npz and result.attention is not None:
        args.npz.write_bytes(result.attention.to_npz({**settings, OUTPUT_TOKENS: list(result.output_tokens)}))
    return 0
