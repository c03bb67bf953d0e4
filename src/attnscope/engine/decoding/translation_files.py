"""A translation as one JSON document (the CLI's --json): its attention record plus the text and every step."""
from __future__ import annotations

import json
from typing import Any

from attnscope.engine.decoding.translator import Translation


def steps_json(result: Translation) -> list[dict[str, object]]:
    """Each generated token with its probability, entropy and top alternatives, rounded to 6 decimals."""
    return [{"step": s.index, "token": s.token, "token_id": s.token_id, "prob": round(s.prob, 6),
             "entropy": round(s.entropy, 6), "top_k": [[t, round(p, 6)] for t, p in s.top_k]}
            for s in result.steps or []]


def translation_json(result: Translation, settings: dict[str, Any]) -> str:
    """The attention record's JSON (with `settings` as its meta), the translation and its steps; needs the attention."""
    if result.attention is None:
        raise ValueError("the translation was made without recording attention")
    payload = json.loads(result.attention.to_json(settings))
    payload.update(translation=result.text, steps=steps_json(result))
    return json.dumps(payload)
