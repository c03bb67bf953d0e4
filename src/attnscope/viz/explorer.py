"""The attention explorer's payload: one sentence's attention, tokens and decoding steps as compact bytes.

The browser draws every look (kind, layer, head, step, hover) from this payload without asking the server again
(ui/explorer.py mounts it; the JavaScript in ui/assets/explorer/ draws it). Layout, all little-endian:

    b"ATSX" | uint32 version | uint32 header length | header (UTF-8 JSON) | zero padding to 4 bytes | float32 data

The header names the tokens, the steps (chosen token, probability, top-k rivals) and, per kind, where its weights
start in the float32 data and which layers are present. Weights are the record's own float32 values, [layer, head,
query, key] in C order; decoder self-attention keeps only the lower triangle of each head (the causal mask makes
the rest zero), row by row. A long sentence whose every layer would pass `max_floats` carries only the selected
layer of each kind: the browser asks for another layer when it is picked.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from attnscope.records.attention import KINDS, AttentionRecord, DecodeStep, Kind

MAGIC, VERSION = b"ATSX", 1
MAX_FLOATS = 1_600_000  # ~6.4 MB: every layer of a ~100-token sentence of opus-mt's shape (6 layers, 8 heads)
TOP_K = 10  # rivals per step sent to the browser


@dataclass(frozen=True)
class Selection:
    """What the explorer shows: a kind of attention, a layer, a head (None: the mean of heads) and a decoding step."""

    kind: Kind = "cross"
    layer: int = 0
    head: int | None = None
    step: int = 0

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "layer": self.layer, "head": self.head, "step": self.step}


def n_floats(record: AttentionRecord) -> int:
    """Floats the payload carries for every layer of `record`."""
    total = 0
    for kind in KINDS:
        array = record.array(kind)
        q, k = array.shape[2:]
        total += array.shape[0] * array.shape[1] * (q * (q + 1) // 2 if kind == "decoder" else q * k)
    return total


def present_layers(record: AttentionRecord, layer: int, max_floats: int = MAX_FLOATS) -> dict[Kind, list[int]]:
    """Every layer of each kind, or, when that passes `max_floats`, layer `layer` (clamped per kind) alone."""
    every = {kind: list(range(record.n_layers(kind))) for kind in KINDS}
    if n_floats(record) <= max_floats:
        return every
    return {kind: [min(layer, record.n_layers(kind) - 1)] for kind in KINDS}


def _weights(record: AttentionRecord, kind: Kind, layers: list[int]) -> np.ndarray:
    """The float32 weights of `layers` as the payload lays them out (lower triangles for decoder self-attention)."""
    array = np.asarray(record.array(kind)[layers], dtype=np.float32)
    if kind == "decoder":
        rows, cols = np.tril_indices(array.shape[2])
        return np.ascontiguousarray(array[:, :, rows, cols]).reshape(-1)
    return np.ascontiguousarray(array).reshape(-1)


def _lay_out(record: AttentionRecord, layers: dict[Kind, list[int]], kinds: Sequence[Kind],
             blocks: list[np.ndarray]) -> dict[str, dict[str, object]]:
    """Append `record`'s weights of `kinds` (their `layers`) to `blocks`; where each starts and its shape."""
    out, offset = {}, sum(b.size for b in blocks)
    for name in kinds:
        array = record.array(name)
        data = _weights(record, name, layers[name])
        out[name] = {"offset": offset, "layers": layers[name], "n_layers": array.shape[0], "heads": array.shape[1],
                     "queries": array.shape[2], "keys": array.shape[3], "lower": name == "decoder"}
        blocks.append(data)
        offset += data.size
    return out


@dataclass(frozen=True)
class Compared:
    """What a comparison sets beside A: another head or layer of the same record (`record` None, `what` "heads"),
    or the same head of another sentence's or checkpoint's record (`what` "sentences" / "checkpoints")."""

    what: str
    label_a: str = "A"
    label: str = "B"
    record: AttentionRecord | None = None
    output_tokens: Sequence[str] | None = None


def _step(step: DecodeStep) -> dict[str, object]:
    return {"token": step.token, "prob": float(step.prob), "entropy": float(step.entropy),
            "top": [[token, float(p)] for token, p in step.top_k[:TOP_K]]}


def payload(record: AttentionRecord, *, view_id: str, selection: Selection, steps: Sequence[DecodeStep] | None = None,
            output_tokens: Sequence[str] | None = None, mode: str = "heatmap", value: str = "weight",
            per_head_scale: bool = False, layer: int | None = None, epoch: int = 0, kind: Kind | None = None,
            title: str = "", other: Compared | None = None, max_floats: int = MAX_FLOATS) -> bytes:
    """The bytes the explorer draws: `record` (weights or any other values named by `value`), its `steps` when it
    was decoded, opened on `selection`. Rows of cross-attention are labelled by the token each step chose: the
    steps' tokens, else `output_tokens` (a saved record's), else the decoder's inputs.

    `view_id` names what the payload shows (model, sentence, decoding settings, values): the browser keeps its own
    selection while the id and `epoch` stay, and starts again from `selection` when either changes (a new epoch:
    the view was changed elsewhere, e.g. in the sidebar). `layer` is the layer a long sentence's payload
    carries (default: the selection's). `mode` is "heatmap" (kind, layer, head, the all-heads grid), "step" (one
    decoding step at a time) or "map" (one map of `kind` alone, its layer and head as the selection says: a forced
    branch, a beam hypothesis, a teacher-forced reference, a training snapshot; `title` says which) or "compare"
    (A: the selection's map of `record`; B: another head or layer of it, or the same head of `other`'s record; and
    their difference, position by position).
    """
    if mode not in ("heatmap", "step", "map", "compare"):
        raise ValueError(f"unknown explorer mode {mode!r}; use 'heatmap', 'step', 'map' or 'compare'")
    if (mode == "map") != (kind is not None) or (mode == "compare") != (other is not None):
        raise ValueError("a map names its kind and a comparison what it compares with (and only they do)")
    if steps is not None and len(steps) != record.n_steps:
        raise ValueError(f"{len(steps)} decoding steps for a record of {record.n_steps} decoder positions")
    outputs = [s.token for s in steps] if steps is not None else output_tokens
    if outputs is not None and len(outputs) != record.n_steps:
        raise ValueError(f"{len(outputs)} output tokens for a record of {record.n_steps} decoder positions")
    layers = present_layers(record, selection.layer if layer is None else layer, max_floats)
    blocks: list[np.ndarray] = []
    kinds = _lay_out(record, layers, KINDS if kind is None else (kind,), blocks)
    b = None
    if other is not None and other.record is not None:
        b = {"label": other.label, "source": list(other.record.source_tokens), "target": list(other.record.target_tokens),
             "output": None if other.output_tokens is None else list(other.output_tokens),
             "kinds": _lay_out(other.record, {k: list(range(other.record.n_layers(k))) for k in KINDS}, KINDS, blocks)}
    header = {"id": view_id, "epoch": epoch, "mode": mode, "kind": kind, "title": title, "value": value,
              "per_head_scale": per_head_scale,
              "source": list(record.source_tokens), "target": list(record.target_tokens),
              "output": None if outputs is None else list(outputs),
              "steps": [_step(s) for s in steps] if steps is not None else None,
              "selection": selection.as_dict(), "kinds": kinds,
              "compare": None if other is None else {"what": other.what, "a": other.label_a, "b": b},
              "complete": all(len(layers[k]) == record.n_layers(k) for k in kinds)}
    return pack(header, np.concatenate(blocks).astype("<f4", copy=False).tobytes())


def pack(header: dict, data: bytes) -> bytes:
    """The payload's layout (module docstring): magic, version, the header as JSON, padding, little-endian float32s."""
    text = json.dumps(header, ensure_ascii=False, allow_nan=False).encode("utf-8")
    head = MAGIC + struct.pack("<II", VERSION, len(text)) + text
    return head + b"\0" * (-len(head) % 4) + data
