"""Saved attention records (`AttentionRecord.to_npz` / `to_json`, the CLI's --npz / --json) read back, safely."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np

from attnscope.engine.recording.record import KINDS, AttentionRecord, RecordError

MAX_RECORD_BYTES = 50 * 2**20


def read_record(data: bytes, name: str) -> AttentionRecord:
    """The record in an .npz or .json file (no pickles are loaded); one sentence saying what is wrong otherwise."""
    if len(data) > MAX_RECORD_BYTES:
        raise RecordError(f"{name} is larger than {MAX_RECORD_BYTES // 2**20} MB")
    if data[:2] == b"PK":
        try:
            return AttentionRecord.from_npz(data)
        except (KeyError, ValueError, zipfile.BadZipFile, OSError) as err:
            if isinstance(err, RecordError):
                raise
            raise RecordError(f"{name} is an NPZ file but not an attnscope attention record ({str(err)[:120]})") from None
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise RecordError(f"{name} is neither an NPZ nor a JSON attention record (save one with "
                          "record.to_npz() or python -m attnscope translate ... --npz)") from None
    missing = [k for k in ("source_tokens", "target_tokens", *KINDS) if not isinstance(payload, dict) or k not in payload]
    if missing:
        raise RecordError(f"{name} is JSON but not an attention record: it lacks {', '.join(missing)}")
    try:
        arrays = [np.asarray(payload[kind], dtype=np.float32) for kind in KINDS]
    except (TypeError, ValueError):
        raise RecordError(f"{name}: the attention arrays are not nested lists of numbers") from None
    return AttentionRecord(tuple(map(str, payload["source_tokens"])), tuple(map(str, payload["target_tokens"])), *arrays)


def record_meta(data: bytes) -> dict:
    """The run settings a record file carries (its `meta`), or {} when it has none."""
    try:
        if data[:2] == b"PK":
            with np.load(io.BytesIO(data), allow_pickle=False) as f:
                return json.loads(str(f["meta"])) if "meta" in f else {}
        meta = json.loads(data.decode("utf-8")).get("meta", {})
        return meta if isinstance(meta, dict) else {}
    except (ValueError, KeyError, OSError, UnicodeDecodeError, AttributeError):
        return {}
