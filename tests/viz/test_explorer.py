"""The explorer's payload, read back independently: every recorded weight exactly, the tokens, the steps, and a long
sentence's payload holding only the selected layer."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.records.attention import KINDS, AttentionRecord, DecodeStep
from attnscope.viz.explorer import Selection, n_floats, payload
from tests.support import read_explorer


def read(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    explored = read_explorer(data)
    return explored.header, explored.arrays


def record(src: int = 5, tgt: int = 4, layers: int = 3, heads: int = 2, seed: int = 0) -> AttentionRecord:
    """Random softmax rows, causal for the decoder, of odd float32 values."""
    rng = np.random.default_rng(seed)

    def rows(q: int, k: int, causal: bool = False) -> np.ndarray:
        x = rng.normal(size=(layers, heads, q, k))
        if causal:
            x = np.where(np.triu(np.ones((q, k), bool), 1), -np.inf, x)
        e = np.exp(x - x.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)).astype(np.float32)
    return AttentionRecord(tuple(f"s{i}" for i in range(src)), tuple(["<bos>", *(f"t{i}" for i in range(tgt - 1))]),
                           rows(src, src), rows(tgt, tgt, True), rows(tgt, src))


def steps(n: int) -> list[DecodeStep]:
    return [DecodeStep(i, 10 + i, f"w{i}", 0.5 + i / 100, (("w", 0.5), ("x", 0.25)), 1.2, (1, 2)) for i in range(n)]


def test_every_weight_comes_back_exactly_with_the_tokens_and_steps() -> None:
    rec = record()
    header, arrays = read(payload(rec, view_id="v", selection=Selection("decoder", 2, 1, 3), steps=steps(4)))
    for kind in KINDS:
        assert np.array_equal(arrays[kind], rec.array(kind)), kind  # bit for bit: float32 in, float32 out
    assert header["source"] == list(rec.source_tokens) and header["target"] == list(rec.target_tokens)
    assert header["output"] == ["w0", "w1", "w2", "w3"] and header["steps"][2]["top"] == [["w", 0.5], ["x", 0.25]]
    assert header["selection"] == {"kind": "decoder", "layer": 2, "head": 1, "step": 3}
    assert header["complete"] and header["kinds"]["decoder"]["lower"]


def test_decoder_self_attention_travels_as_its_lower_triangle() -> None:
    rec = record(src=40, tgt=40, layers=6, heads=8)
    data = payload(rec, view_id="v", selection=Selection())
    full = sum(rec.array(k).size for k in KINDS)
    assert n_floats(rec) == full - 6 * 8 * (40 * 39 // 2)
    assert len(data) < 4 * n_floats(rec) + 4096 and len(data) < 1_000_000  # a 40-token sentence of opus-mt's shape


def test_a_long_sentence_carries_the_selected_layer_of_each_kind() -> None:
    rec = record(src=12, tgt=10, layers=4)
    header, arrays = read(payload(rec, view_id="v", selection=Selection("cross", 2, None, 0), max_floats=100))
    assert not header["complete"] and all(header["kinds"][k]["layers"] == [2] for k in KINDS)
    for kind in KINDS:
        assert np.array_equal(arrays[kind][0], rec.array(kind)[2])
        assert header["kinds"][kind]["n_layers"] == 4


def test_a_saved_records_rows_are_named_by_what_came_next_and_bad_lengths_are_refused() -> None:
    rec = record()
    header, _ = read(payload(rec, view_id="v", selection=Selection(), output_tokens=["a", "b", "c", "d"]))
    assert header["output"] == ["a", "b", "c", "d"] and header["steps"] is None
    with pytest.raises(ValueError, match="3 output tokens for a record of 4"):
        payload(rec, view_id="v", selection=Selection(), output_tokens=["a", "b", "c"])
    with pytest.raises(ValueError, match="unknown explorer mode"):
        payload(rec, view_id="v", selection=Selection(), mode="grid")
