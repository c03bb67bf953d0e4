"""The head atlas's payload: every head's joint query/key map over a sample, as compact bytes for the explorer.

The explorer component (ui/assets/explorer/atlas.js) draws it: the layers × heads matrix of small maps of a kind,
one head large with pan, zoom and hover, colours by query/key, position or token, and a click on a point that
opens its sentence. The layout is the explorer's (viz/explorer.py), all little-endian:

    b"ATSX" | uint32 version | uint32 header length | header (UTF-8 JSON, mode "atlas") | padding to 4 | float32 data

The data holds, first, each side's points (source tokens, then target tokens) as (sentence, position, token
number) triples, sentence by sentence; then per kind the maps [layer, head, point, (x, y)] in C order, a kind's
queries (the points of its query side) before its keys. Coordinates are the projection's own float32 values.
"""
from __future__ import annotations

import json
import struct
from typing import Sequence

import numpy as np

from attnscope.engine.analysis.atlas_types import GROUP_RULES, GROUPS, SIDES, Atlas
from attnscope.records.attention import KINDS
from attnscope.viz.explorer import MAGIC, VERSION, Selection

SIDE_NAMES = ("source", "target")


def _side_points(atlas: Atlas, side: str, vocabulary: dict[str, int]) -> np.ndarray:
    rows = [(n, p, vocabulary.setdefault(token, len(vocabulary))) for n, p, token in atlas.tokens[side]]
    return np.asarray(rows, np.float32).reshape(-1, 3)


def atlas_payload(atlas: Atlas, sentences: Sequence[str], *, view_id: str, selection: Selection) -> bytes:
    """The bytes the explorer draws in its "atlas" mode: `atlas` of `sentences` (the texts of atlas.sentences, in
    its order), opened on `selection`'s kind, layer and head; the browser keeps its own view while `view_id` stays."""
    if len(sentences) != len(atlas.sentences):
        raise ValueError(f"{len(sentences)} sentences for an atlas of {len(atlas.sentences)}")
    vocabulary: dict[str, int] = {}
    blocks, sides, offset = [], {}, 0
    for side in SIDE_NAMES:
        points = _side_points(atlas, side, vocabulary)
        lengths = np.bincount(points[:, 0].astype(int), minlength=len(sentences)).tolist()
        sides[side] = {"offset": offset, "n": len(points), "lengths": lengths}
        blocks.append(points.reshape(-1))
        offset += points.size
    kinds = {}
    for kind in KINDS:
        maps = np.ascontiguousarray(atlas.maps[kind], dtype=np.float32)
        q_side, k_side = SIDES[kind]
        by_head = atlas.groups[atlas.groups["kind"] == kind].set_index(["layer", "head"])["group"]
        kinds[kind] = {"offset": offset, "n_layers": maps.shape[0], "heads": maps.shape[1], "queries": q_side,
                       "keys": k_side, "nq": sides[q_side]["n"], "nk": sides[k_side]["n"],
                       "explained": np.round(atlas.explained[kind], 4).tolist(),
                       "groups": [[str(by_head[(layer, head)]) for head in range(maps.shape[1])]
                                  for layer in range(maps.shape[0])]}
        blocks.append(maps.reshape(-1))
        offset += maps.size
    header = {"id": view_id, "mode": "atlas", "selection": selection.as_dict(),
              "sentences": list(sentences), "tokens": list(vocabulary), "sides": sides, "kinds": kinds,
              "groups": list(GROUPS), "group_rules": GROUP_RULES}
    text = json.dumps(header, ensure_ascii=False, allow_nan=False).encode("utf-8")
    head = MAGIC + struct.pack("<II", VERSION, len(text)) + text
    head += b"\0" * (-len(head) % 4)
    return head + np.concatenate(blocks).astype("<f4", copy=False).tobytes()

