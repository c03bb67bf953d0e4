"""Record files from anyone: refused in one sentence within seconds when their arrays would not fit, or their JSON
nests without end; refused in one sentence when their weights cannot be attention; and any record that was saved
reads back as it was (property-based)."""
from __future__ import annotations

import io
import json
import re
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscope.engine.recording.record_files import read_record
from attnscope.records.attention import AttentionRecord, RecordError
from tests.record_fixtures import pattern_record


def _npz_declaring(shape: tuple[int, ...], payload: int) -> bytes:
    """An NPZ whose `encoder` header declares `shape` (float32) but holds `payload` zero bytes: a few MB on disk."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("encoder.npy", header.getvalue() + bytes(payload))
    return out.getvalue()


def test_an_npz_declaring_more_than_the_limit_is_refused_before_anything_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _npz_declaring((1, 1, 32768, 32768), 2**22)  # 4 GiB declared, 4 MiB of zeros

    def loaded(*_: object, **__: object) -> None:
        raise AssertionError("an array was read from a record that should have been refused")

    monkeypatch.setattr(np, "load", loaded)  # only the zip's directory and the arrays' headers may be read
    with pytest.raises(RecordError, match=r"big.npz unpacks to 4,096 MB, more than the 1,024 MB a record may hold"):
        read_record(data, "big.npz")


def test_from_npz_called_directly_checks_the_same_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    """AttentionRecord.from_npz is public: bytes from anyone given straight to it get read_record's size checks."""
    data = _npz_declaring((1, 1, 32768, 32768), 2**22)

    def loaded(*_: object, **__: object) -> None:
        raise AssertionError("an array was read from a record that should have been refused")

    monkeypatch.setattr(np, "load", loaded)
    with pytest.raises(RecordError, match=r"the record unpacks to 4,096 MB, more than the 1,024 MB a record may hold"):
        AttentionRecord.from_npz(data)
    with pytest.raises(RecordError, match=r"big.npz is larger than 50 MB"):
        AttentionRecord.from_npz(b"PK" + bytes(50 * 2**20), "big.npz")


def test_an_npz_within_the_limit_but_beyond_the_machines_memory_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from attnscope.model import budget
    monkeypatch.setattr(budget, "available_bytes", lambda: 2**20)
    with pytest.raises(RecordError, match=r"r.npz's arrays would take 0.0 GB of memory, more than"):
        read_record(_npz_declaring((1, 1, 512, 512), 16), "r.npz")


def test_a_deeply_nested_json_record_is_refused_in_one_sentence() -> None:
    data = b"[" * 200_000 + b"]" * 200_000
    with pytest.raises(RecordError, match=r"deep.json is not an attention record: its JSON is nested 200,000 levels deep"):
        read_record(data, "deep.json")


@pytest.mark.parametrize("value, expected", [
    (np.nan, "odd is not attention: its encoder weights hold 1 NaN or infinite values"),
    (-0.5, "odd is not attention: its encoder weights run from -0.5 to 1, outside the 0 to 1 of softmax outputs"),
    (1.5, "odd is not attention: its encoder weights run from 0 to 1.5, outside the 0 to 1 of softmax outputs")])
@pytest.mark.parametrize("as_json", [False, True])
def test_weights_that_cannot_be_attention_are_refused_in_one_sentence(value: float, expected: str, as_json: bool) -> None:
    record = pattern_record()
    encoder = record.encoder.copy()
    encoder[0, 0, 0, 0] = value
    odd = AttentionRecord(record.source_tokens, record.target_tokens, encoder, record.decoder, record.cross)
    with pytest.raises(RecordError, match=re.escape(expected)):
        read_record(odd.to_json().encode() if as_json else odd.to_npz(), "odd")
    assert read_record(record.to_npz(), "fine").source_tokens == record.source_tokens


TOKENS = st.lists(st.text(min_size=1, max_size=6).filter(lambda t: t == t.strip() and "\0" not in t), min_size=1,
                  max_size=4)


@settings(max_examples=30, deadline=None)
@given(src=TOKENS, tgt=TOKENS, layers=st.integers(1, 2), heads=st.integers(1, 2), seed=st.integers(0, 2**16),
       as_json=st.booleans())
def test_any_saved_record_reads_back_as_it_was(src: list[str], tgt: list[str], layers: int, heads: int, seed: int,
                                               as_json: bool) -> None:
    rng = np.random.default_rng(seed)

    def weights(q: int, k: int) -> np.ndarray:
        w = rng.random((layers, heads, q, k), dtype=np.float32)
        return w / w.sum(-1, keepdims=True)

    record = AttentionRecord(tuple(src), tuple(tgt), weights(len(src), len(src)), weights(len(tgt), len(tgt)),
                             weights(len(tgt), len(src)))
    data = record.to_json().encode() if as_json else record.to_npz()
    back = read_record(data, "r")
    assert (back.source_tokens, back.target_tokens) == (record.source_tokens, record.target_tokens)
    for kind in ("encoder", "decoder", "cross"):
        assert np.allclose(back.array(kind), record.array(kind), atol=1e-6)


VALUES = st.recursive(st.none() | st.floats() | st.integers(-3, 3) | st.text(max_size=5), lambda c: st.lists(c, max_size=3)
                      | st.dictionaries(st.text(max_size=3), c, max_size=3), max_leaves=12)
RECORDS = st.fixed_dictionaries({k: VALUES for k in ("source_tokens", "target_tokens", "encoder", "decoder", "cross")},
                                optional={"meta": VALUES})


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=400) | st.text(max_size=400).map(str.encode) | VALUES.map(lambda v: json.dumps(v).encode())
       | RECORDS.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_give_a_record_or_one_record_error(data: bytes) -> None:
    try:
        read_record(data, "f")
    except RecordError:
        pass


@pytest.mark.parametrize("thing", [None, "model", lambda x: x])
def test_record_attention_given_no_module_says_so_in_one_sentence(thing: object) -> None:
    from attnscope.engine.recording.capture import record_attention
    with pytest.raises(RecordError, match=r"record_attention records a torch.nn.Module \(your model\), not a"):
        with record_attention(thing):
            pass


def test_a_records_meta_that_is_no_mapping_is_left_out() -> None:
    from attnscope.engine.recording.record_files import record_meta
    data = pattern_record().to_npz([1, 2])  # type: ignore[arg-type]
    assert record_meta(data) == {}
