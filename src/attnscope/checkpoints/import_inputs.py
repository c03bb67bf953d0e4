"""What an import takes besides the weights, read from text: example pairs to check it against and special
tokens by role (for `python -m attnscope import` and the Checkpoints page)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.state_dict_checks import Example


def read_examples(path: Path) -> list[Example]:
    """(source, output) pairs from a file of 'source<TAB>output' lines (see parse_examples)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise CheckpointError(f"cannot read {path}: {err.strerror or err}") from None
    return parse_examples(lines, path.name)


def parse_examples(lines: Sequence[str], where: str) -> list[Example]:
    """Lines 'source<TAB>output' or 'source ||| output'; an output like [2, 14, 3] is read as ids."""
    examples: list[Example] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        sep = "\t" if "\t" in line else " ||| " if " ||| " in line else None
        if sep is None:
            raise CheckpointError(f"{where} line {number} has no tab or ' ||| ': write 'source<TAB>your model's output'")
        source, output = (part.strip() for part in line.split(sep, 1))
        if output.startswith("[") and output.endswith("]"):
            try:
                examples.append((source, [int(i) for i in json.loads(output)]))
                continue
            except (json.JSONDecodeError, TypeError, ValueError):
                pass
        examples.append((source, output))
    return examples


def parse_specials(text: str | None, where: str = "--specials") -> dict[str, str] | None:
    """'pad=<blank>,bos=<s>' -> {'pad': '<blank>', 'bos': '<s>'}; `where` names the field in the error."""
    if not text:
        return None
    pairs = [part.split("=", 1) for part in text.split(",") if part.strip()]
    if any(len(p) != 2 for p in pairs):
        raise CheckpointError(f"{where} must look like pad=<blank>,bos=<s> (role=token, commas between), got {text}")
    return {role.strip(): token.strip() for role, token in pairs}
