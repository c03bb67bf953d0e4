"""JSON from files anyone can hand over (configs, tokenizers, records), parsed with a nesting limit.

json.loads recurses once per level, so a file of 100,000 `[` raises RecursionError, a traceback rather
than a sentence. The depth is measured first, outside strings, in one vectorised pass, and a deeper
document is refused as invalid JSON (a JSONDecodeError, which every caller already reports).
"""
from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

MAX_DEPTH = 64  # the deepest file attnscope reads (a tokenizer.json) nests about 6 levels
KEPT = b'"[]{}'
DROPPED = bytes(b for b in range(256) if b not in KEPT)
STRINGS = re.compile(rb'"[^"]*"')
STEP = np.zeros(256, dtype=np.int8)
STEP[[ord("["), ord("{")]], STEP[[ord("]"), ord("}")]] = 1, -1


def depth(text: str) -> int:
    """How deep arrays and objects nest in `text` (brackets inside strings do not count); C-speed passes only."""
    raw = text.encode("utf-8", errors="replace").replace(b"\\\\", b"").replace(b'\\"', b"")  # escapes, pairs from the left
    brackets = STRINGS.sub(b"", raw.translate(None, DROPPED)).replace(b'"', b"")
    if not brackets:
        return 0
    return int(np.cumsum(STEP[np.frombuffer(brackets, dtype=np.uint8)], dtype=np.int64).max())


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads, refusing documents nested deeper than `max_depth` (JSONDecodeError, like any invalid JSON)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    found = depth(text)
    if found > max_depth:
        raise json.JSONDecodeError(f"nested {found:,} levels deep, more than the {max_depth} attnscope reads", text, 0)
    return json.loads(text)
