"""AttentionRecord validates at the boundary and exports losslessly."""
from __future__ import annotations

import json

import numpy as np
import pytest

from attnscope.record import AttentionRecord, RecordError
from tests.record_fixtures import SRC, TGT, pattern_record


def test_shapes_are_checked_against_tokens_with_a_message_naming_them() -> None:
    good = pattern_record()
    with pytest.raises(RecordError, match=r"queries \['a', 'b', 'a', '.'\]"):
        AttentionRecord(SRC[:-1], TGT, good.encoder, good.decoder, good.cross)
    with pytest.raises(RecordError, match="must be \\[layer, head, query, key\\]"):
        AttentionRecord(SRC, TGT, good.encoder[0], good.decoder, good.cross)


def test_accessors_and_read_only_arrays() -> None:
    r = pattern_record("uniform")
    assert r.axes("cross") == (TGT, SRC)
    assert np.allclose(r.pattern("encoder", 1, 2), 1 / len(SRC))
    assert np.allclose(r.mean_over_heads("decoder", 0), r.pattern("decoder", 0, 0))
    with pytest.raises(ValueError):
        r.encoder[0, 0, 0, 0] = 5
    with pytest.raises(RecordError, match="layers 0..1"):
        r.pattern("cross", 2, 0)


def test_long_table_has_one_row_per_cell() -> None:
    r = pattern_record()
    frame = r.to_frame()
    assert len(frame) == sum(r.array(k).size for k in ("encoder", "decoder", "cross"))
    row = frame[(frame.kind == "cross") & (frame.query_index == 3) & (frame.key_index == 1)].iloc[0]
    assert (row.query_token, row.key_token) == ("x", "b")


def test_npz_and_json_round_trip() -> None:
    r = pattern_record("previous")
    back = AttentionRecord.from_npz(r.to_npz({"checkpoint": "x"}))
    assert back.source_tokens == SRC and np.array_equal(back.decoder, r.decoder)
    data = json.loads(r.to_json({"sentence": "a b"}))
    assert data["meta"] == {"sentence": "a b"} and np.allclose(data["cross"], r.cross)
