"""viz/atlas.py: the atlas payload read back by its documented layout (independently of viz/atlas.py) gives the atlas's own
float32 coordinates, tokens, sentences and groups."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from attnscope.engine.analysis.atlas import atlas, vectors_each
from attnscope.engine.analysis.atlas_types import SIDES
from attnscope.records.attention import KINDS
from attnscope.viz.atlas import atlas_payload
from attnscope.viz.explorer import Selection
from tests.engine_fixtures import tiny_translator

SENTENCES = ["a b c d", "e f", "g h i j k l a"]


@pytest.fixture(scope="module")
def mapped():
    return atlas(sorted(vectors_each(tiny_translator(0, eos_bias=2.0), SENTENCES)))


def read(data: bytes) -> tuple[dict, np.ndarray]:
    assert data[:4] == b"ATSX"
    _, length = struct.unpack("<II", data[4:12])
    return json.loads(data[12:12 + length].decode("utf-8")), np.frombuffer(data[(12 + length + 3) // 4 * 4:], "<f4")


def test_the_payload_round_trips(mapped) -> None:
    header, floats = read(atlas_payload(mapped, SENTENCES, view_id="x", selection=Selection("decoder", 1, 2)))
    assert header["mode"] == "atlas" and header["sentences"] == SENTENCES
    assert header["selection"] == {"kind": "decoder", "layer": 1, "head": 2, "step": 0}
    for side in ("source", "target"):
        info = header["sides"][side]
        points = floats[info["offset"]:info["offset"] + 3 * info["n"]].reshape(-1, 3)
        assert [(int(n), int(p), header["tokens"][int(t)]) for n, p, t in points] == mapped.tokens[side]
        assert info["lengths"] == [sum(1 for n, _, _ in mapped.tokens[side] if n == i) for i in range(len(SENTENCES))]
    for kind in KINDS:
        info = header["kinds"][kind]
        assert (info["queries"], info["keys"]) == SIDES[kind]
        shape = (info["n_layers"], info["heads"], info["nq"] + info["nk"], 2)
        got = floats[info["offset"]:info["offset"] + int(np.prod(shape))].reshape(shape)
        np.testing.assert_array_equal(got, mapped.maps[kind])
        rows = mapped.groups[mapped.groups["kind"] == kind]
        assert [g for layer in info["groups"] for g in layer] == list(rows.sort_values(["layer", "head"])["group"])


def test_sentences_must_match_the_atlas(mapped) -> None:
    with pytest.raises(ValueError, match="2 sentences for an atlas of 3"):
        atlas_payload(mapped, SENTENCES[:2], view_id="x", selection=Selection())
