"""Saved attention records (`AttentionRecord.to_npz` / `to_json`, the CLI's --npz / --json) read back, safely.

A record is a file from anyone: its size is checked twice (the file, then what its arrays declare they
unpack to, before any is read), its JSON is parsed with a nesting limit, nothing is unpickled, and what
cannot be attention (NaN, negative weights, weights above 1) is refused in one sentence.
"""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np

from attnscope.model import untrusted
from attnscope.records.attention import KINDS, AttentionRecord, RecordError
from attnscope.records.npz_limits import check_file


def read_record(data: bytes, name: str) -> AttentionRecord:
    """The record in an .npz or .json file (no pickles are loaded); one sentence saying what is wrong otherwise."""
    check_file(data, name)
    if data[:2] == b"PK":
        try:
            return check_weights(AttentionRecord.from_npz(data, name), name)  # its sizes checked before it is read
        except (KeyError, ValueError, zipfile.BadZipFile, OSError, EOFError) as err:
            if isinstance(err, RecordError):
                raise
            raise RecordError(f"{name} is an NPZ file but not an attnscope attention record ({str(err)[:120]})") from None
    try:
        payload = untrusted.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        if isinstance(err, json.JSONDecodeError) and "nested" in err.msg:
            raise RecordError(f"{name} is not an attention record: its JSON is {err.msg}") from None
        raise RecordError(f"{name} is neither an NPZ nor a JSON attention record (save one with "
                          "record.to_npz() or python -m attnscope translate ... --npz)") from None
    missing = [k for k in ("source_tokens", "target_tokens", *KINDS) if not isinstance(payload, dict) or k not in payload]
    if missing:
        raise RecordError(f"{name} is JSON but not an attention record: it lacks {', '.join(missing)}")
    try:
        arrays = [np.asarray(payload[kind], dtype=np.float32) for kind in KINDS]
    except (TypeError, ValueError):
        raise RecordError(f"{name}: the attention arrays are not nested lists of numbers") from None
    tokens = [payload[side] for side in ("source_tokens", "target_tokens")]
    if not all(isinstance(t, list) for t in tokens):
        raise RecordError(f"{name}: source_tokens and target_tokens must be lists of tokens")
    return check_weights(AttentionRecord(tuple(map(str, tokens[0])), tuple(map(str, tokens[1])), *arrays), name)


SLACK = 1e-4  # float rounding a softmax row may show beyond 0 or 1


def check_weights(record: AttentionRecord, name: str) -> AttentionRecord:
    """`record`, or one sentence refusing it: attention weights are softmax outputs (finite, 0 to 1), and NaN,
    negative or larger numbers would be drawn as shares of attention they are not."""
    for kind in KINDS:
        array = record.array(kind)
        bad = int(np.count_nonzero(~np.isfinite(array)))
        if bad:
            raise RecordError(f"{name} is not attention: its {kind} weights hold {bad:,} NaN or infinite values "
                              "(attention weights are softmax outputs, finite and from 0 to 1)")
        if array.size and (array.min() < -SLACK or array.max() > 1 + SLACK):
            raise RecordError(f"{name} is not attention: its {kind} weights run from {array.min():.3g} to "
                              f"{array.max():.3g}, outside the 0 to 1 of softmax outputs")
    return record


def record_meta(data: bytes) -> dict:
    """The run settings a record file carries (its `meta`), or {} when it has none; a JSON translation's `steps`
    give its OUTPUT_TOKENS when the meta does not."""
    try:
        if data[:2] == b"PK":
            with np.load(io.BytesIO(data), allow_pickle=False) as f:
                meta = untrusted.loads(str(f["meta"])) if "meta" in f else {}
        else:
            payload = untrusted.loads(data.decode("utf-8"))
            meta = payload.get("meta", {})
            steps = payload.get("steps")
            if isinstance(meta, dict) and isinstance(steps, list) and all(isinstance(s, dict) for s in steps):
                meta.setdefault(OUTPUT_TOKENS, [s.get("token") for s in steps])
    except (ValueError, KeyError, OSError, UnicodeDecodeError, AttributeError, zipfile.BadZipFile):
        return {}
    return meta if isinstance(meta, dict) else {}


OUTPUT_TOKENS = "output_tokens"  # the meta field of what each step produced (y1 .. <eos>), written with a translation


def produced_tokens(record: AttentionRecord, meta: dict) -> tuple[str, ...] | None:
    """What each decoding step of `record` produced, as its meta says (the live pages label cross-attention rows
    by these, not by the decoder's input); None when the file does not say (e.g. a record from your own code)."""
    tokens = meta.get(OUTPUT_TOKENS)
    if isinstance(tokens, list) and len(tokens) == record.n_steps and all(isinstance(t, str) for t in tokens):
        return tuple(tokens)
    return None
