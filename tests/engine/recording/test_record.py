"""AttentionRecord validates at the boundary and exports losslessly."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from attnscope.records.attention import KINDS, AttentionRecord, RecordError

# Random row-stochastic arrays with distinct values everywhere, so any mix-up of layers, heads,
# queries, keys or tokens shows.

RSRC = ("the", "cat", "sat", "<eos>")
RTGT = ("<bos>", "die", "Katze")


def arrays(seed: int = 0, layers: int = 2, dec_layers: int = 3, heads: int = 4, s: int = len(RSRC),
           t: int = len(RTGT)) -> dict[str, np.ndarray]:
    """Random row-stochastic arrays of the right shapes (distinct values, so mix-ups show)."""
    rng = np.random.default_rng(seed)

    def rows(*shape: int) -> np.ndarray:
        x = rng.random(shape).astype(np.float32) + 0.01
        return x / x.sum(-1, keepdims=True)

    return {"encoder": rows(layers, heads, s, s), "decoder": rows(dec_layers, heads, t, t),
            "cross": rows(dec_layers, heads, t, s)}


def record(seed: int = 0) -> AttentionRecord:
    return AttentionRecord(RSRC, RTGT, **arrays(seed))


def test_valid_record_keeps_tokens_as_tuples_and_arrays_unchanged() -> None:
    a = arrays(1)
    r = AttentionRecord(list(RSRC), list(RTGT), **a)
    assert r.source_tokens == RSRC and r.target_tokens == RTGT
    assert isinstance(r.source_tokens, tuple) and isinstance(r.target_tokens, tuple)
    for kind in KINDS:
        np.testing.assert_array_equal(r.array(kind), a[kind])
    assert r.n_heads == 4
    assert (r.n_layers("encoder"), r.n_layers("decoder"), r.n_layers("cross")) == (2, 3, 3)


@pytest.mark.parametrize("kind,bad", [
    ("encoder", dict(s=5)),  # 5 source positions, but 4 source tokens
    ("decoder", dict(t=4)),
    ("cross", dict(t=2)),
])
def test_shape_mismatch_names_the_tokens(kind: str, bad: dict) -> None:
    good, wrong = arrays(), arrays(**bad)
    with pytest.raises(RecordError) as err:
        AttentionRecord(RSRC, RTGT, **(good | {kind: wrong[kind]}))
    message = str(err.value)
    assert kind in message
    queries, keys = {"encoder": (RSRC, RSRC), "decoder": (RTGT, RTGT), "cross": (RTGT, RSRC)}[kind]
    assert f"queries {list(queries)}" in message and f"keys {list(keys)}" in message
    assert f"{wrong[kind].shape[2]} queries x {wrong[kind].shape[3]} keys" in message


def test_mismatch_is_a_value_error() -> None:
    a = arrays()
    with pytest.raises(ValueError, match=r"tokens give 2 x 2: queries \['<bos>', 'die'\]"):
        AttentionRecord(RSRC, RTGT[:-1], **a)


@pytest.mark.parametrize("kind", KINDS)
def test_wrong_ndim_is_rejected(kind: str) -> None:
    a = arrays()
    with pytest.raises(RecordError, match=rf"{kind} attention must be \[layer, head, query, key\], got shape"):
        AttentionRecord(RSRC, RTGT, **(a | {kind: a[kind][0]}))


@pytest.mark.parametrize("kind", KINDS)
def test_non_float_arrays_are_rejected(kind: str) -> None:
    a = arrays()
    with pytest.raises(RecordError, match=f"{kind} attention must hold floats"):
        AttentionRecord(RSRC, RTGT, **(a | {kind: (a[kind] > 0.2).astype(np.int64)}))


def test_heads_and_layers_must_agree() -> None:
    a = arrays()
    with pytest.raises(RecordError, match="disagree on heads"):
        AttentionRecord(RSRC, RTGT, **(a | {"encoder": arrays(heads=2)["encoder"]}))
    with pytest.raises(RecordError, match="disagree on heads"):
        AttentionRecord(RSRC, RTGT, **(a | {"cross": arrays(dec_layers=2)["cross"]}))


def test_unknown_kind_is_rejected() -> None:
    r = record()
    with pytest.raises(RecordError, match="unknown attention kind 'self'"):
        r.axes("self")  # type: ignore[arg-type]
    with pytest.raises(RecordError, match="unknown attention kind"):
        r.pattern("self", 0, 0)  # type: ignore[arg-type]


def test_axes() -> None:
    r = record()
    assert r.axes("encoder") == (RSRC, RSRC)
    assert r.axes("decoder") == (RTGT, RTGT)
    assert r.axes("cross") == (RTGT, RSRC)


def test_pattern_is_one_head_and_checks_its_range() -> None:
    a = arrays(2)
    r = AttentionRecord(RSRC, RTGT, **a)
    np.testing.assert_array_equal(r.pattern("cross", 2, 3), a["cross"][2, 3])
    np.testing.assert_array_equal(r.pattern("encoder", 1, 0), a["encoder"][1, 0])
    assert r.pattern("decoder", 0, 1).shape == (len(RTGT), len(RTGT))
    for layer, head in ((2, 0), (0, 4), (-1, 0)):
        with pytest.raises(RecordError, match=f"layers 0..1 and heads 0..3; asked for layer {layer}, head {head}"):
            r.pattern("encoder", layer, head)


def test_mean_over_heads() -> None:
    a = arrays(3)
    r = AttentionRecord(RSRC, RTGT, **a)
    for kind in KINDS:
        np.testing.assert_allclose(r.mean_over_heads(kind, 1), a[kind][1].mean(axis=0), rtol=1e-6)
    one_head = {k: v[:, :1] for k, v in a.items()}
    r1 = AttentionRecord(RSRC, RTGT, **one_head)
    np.testing.assert_array_equal(r1.mean_over_heads("cross", 0), one_head["cross"][0, 0])


def test_arrays_are_read_only() -> None:
    r = record()
    for kind in KINDS:
        assert not r.array(kind).flags.writeable
        with pytest.raises(ValueError):
            r.array(kind)[0, 0, 0, 0] = 5.0
    with pytest.raises(ValueError):
        r.pattern("cross", 0, 0)[0, 0] = 5.0
    with pytest.raises(AttributeError):
        r.encoder = np.zeros((2, 4, 4, 4), dtype=np.float32)  # type: ignore[misc]


def test_to_frame_has_one_row_per_cell_with_its_tokens() -> None:
    a = arrays(4)
    r = AttentionRecord(RSRC, RTGT, **a)
    frame = r.to_frame()
    assert len(frame) == sum(x.size for x in a.values())
    for kind in KINDS:
        part = frame[frame["kind"] == kind]
        assert len(part) == a[kind].size
        assert not part.duplicated(["layer", "head", "query_index", "key_index"]).any()
        queries, keys = r.axes(kind)
        assert (part["query_token"] == [queries[i] for i in part["query_index"]]).all()
        assert (part["key_token"] == [keys[i] for i in part["key_index"]]).all()
        weights = a[kind][part["layer"], part["head"], part["query_index"], part["key_index"]]
        np.testing.assert_array_equal(part["weight"].to_numpy(), weights)
    row = frame[(frame["kind"] == "cross") & (frame["layer"] == 1) & (frame["head"] == 2)
                & (frame["query_index"] == 2) & (frame["key_index"] == 1)]
    assert len(row) == 1
    assert row.iloc[0]["query_token"] == "Katze" and row.iloc[0]["key_token"] == "cat"
    assert row.iloc[0]["weight"] == a["cross"][1, 2, 2, 1]


def test_npz_round_trip_is_exact() -> None:
    r = AttentionRecord(("naïve", "ü", "<eos>"), ("<bos>", "日本"), **arrays(5, s=3, t=2))
    data = r.to_npz({"checkpoint": "tiny", "beam": 3})
    back = AttentionRecord.from_npz(data)
    assert back.source_tokens == r.source_tokens and back.target_tokens == r.target_tokens
    for kind in KINDS:
        assert back.array(kind).dtype == r.array(kind).dtype
        np.testing.assert_array_equal(back.array(kind), r.array(kind))
    with np.load(io.BytesIO(data)) as f:
        assert json.loads(str(f["meta"])) == {"checkpoint": "tiny", "beam": 3}


def test_from_npz_validates_like_the_constructor() -> None:
    r = record()
    with np.load(io.BytesIO(r.to_npz())) as f:
        parts = {k: f[k] for k in f.files}
    buffer = io.BytesIO()
    np.savez(buffer, **(parts | {"target_tokens": np.asarray(["<bos>"])}))
    with pytest.raises(RecordError, match="queries"):
        AttentionRecord.from_npz(buffer.getvalue())


def test_to_json_parses_and_holds_the_arrays() -> None:
    a = arrays(6)
    r = AttentionRecord(RSRC, RTGT, **a)
    payload = json.loads(r.to_json({"sentence": "the cat sat"}))
    assert payload["source_tokens"] == list(RSRC) and payload["target_tokens"] == list(RTGT)
    assert payload["meta"] == {"sentence": "the cat sat"}
    for kind in KINDS:
        got = np.asarray(payload[kind])
        assert got.shape == a[kind].shape
        np.testing.assert_allclose(got, a[kind], atol=1e-6)
    assert json.loads(r.to_json())["meta"] == {}


def test_a_step_is_a_view_of_its_rows() -> None:
    r = record(7)
    for t in range(r.n_steps):
        view = r.step(t)
        assert view.prefix == RTGT[: t + 1] and view.source_tokens == RSRC
        assert view.cross.shape == (r.n_layers("cross"), r.n_heads, len(RSRC))
        assert view.decoder_self.shape == (r.n_layers("decoder"), r.n_heads, t + 1)
        assert np.array_equal(view.cross, r.cross[:, :, t])
        assert np.array_equal(view.decoder_self, r.decoder[:, :, t, : t + 1])
        assert np.shares_memory(view.cross, r.cross)  # no copy
        assert np.array_equal(view.source_row(1, 2), r.pattern("cross", 1, 2)[t])
        assert np.allclose(view.source_row(0, None), r.mean_over_heads("cross", 0)[t])
    with pytest.raises(RecordError, match=f"steps 0..{len(RTGT) - 1}; asked for step {len(RTGT)}"):
        r.step(len(RTGT))
    with pytest.raises(RecordError, match="asked for layer 5, head 0"):
        r.step(0).source_row(5, 0)
