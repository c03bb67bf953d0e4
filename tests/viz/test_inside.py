"""Inside one head's payload: every array is the trace's own, every layer or the open one, the lens at every step."""
from __future__ import annotations

import numpy as np
import pytest

import attnscope
from attnscope.engine.inside.lens import logit_lenses
from attnscope.engine.inside.traced import sentence_trace
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.viz.explorer import Selection
from attnscope.viz.inside import Block, TracedSentence, layer_arrays, n_floats, payload, present_layers, shared_arrays
from tests.support import TOY_CHECKPOINT, read_explorer


@pytest.fixture(scope="module")
def traced() -> TracedSentence:
    tr = attnscope.load(TOY_CHECKPOINT)
    result = tr.translate("a b c d")
    with tr.inference():
        whole = sentence_trace(tr.model, result.source_ids, decoder_inputs(result.target_ids, tr.model.config.bos_id))
    lenses = logit_lenses(tr.model, whole, [s.token_id for s in result.steps], k=3)
    return TracedSentence.of(whole, lenses, tr.bundle.tgt_codec.piece, result.attention, result.steps, False)


def sent(traced: TracedSentence, layers: list[int], query: int | None = 2):
    blocks = [Block.of(layer_arrays(traced, layer)) for layer in layers]
    return read_explorer(payload(traced, Block.of(shared_arrays(traced)), blocks, view_id="x",
                                 selection=Selection("decoder", layers[0], 1, 3), query=query, epoch=4, present=layers))


def test_every_array_is_the_traces_and_the_rows_are_the_recorded_ones(traced: TracedSentence) -> None:
    got = sent(traced, present_layers(traced, 0))
    assert got.header["complete"] and got.header["selection"] == {"kind": "decoder", "layer": 0, "head": 1, "step": 3,
                                                                   "query": 2}
    for (kind, layer), s in traced.trace.sublayers.items():
        for name in ("q", "k", "v", "scores", "weights", "concat", "output", "w_o", "b_o", "residual", "norm_input",
                     "norm_output", "block_output"):
            assert np.array_equal(got.arrays[f"{kind}.{layer}.{name}"], getattr(s, name)), (kind, layer, name)
        recorded = traced.record.array(kind)[layer]
        gap = got.arrays[f"{kind}.{layer}.gap"]
        assert gap.shape == s.weights.shape[:2] and gap.max() <= 1e-6
        assert np.isclose(gap.max(), np.abs(s.weights - recorded).max(), atol=1e-9)
    assert "encoder.0.bias" not in got.arrays  # sinusoidal positions: no bias on the scores
    for stream in ("source", "target"):
        inputs = getattr(traced.trace, stream)
        assert np.array_equal(got.arrays[f"{stream}.total"], inputs.total)
        assert got.header["scales"][stream] == inputs.scale
    assert np.array_equal(got.arrays["memory"], traced.trace.memory)
    assert got.header["target"] == ["<bos>", "d", "c", "b", "a"] and got.header["output"][-1] == "<eos>"


def test_a_long_sentence_carries_the_open_layer_alone(traced: TracedSentence) -> None:
    assert present_layers(traced, 1, max_floats=n_floats(traced) - 1) == [1]
    assert present_layers(traced, 1, max_floats=n_floats(traced)) == [0, 1]
    got = sent(traced, [1])
    assert not got.header["complete"] and all(info["layers"] == [1] for info in got.header["kinds"].values())
    assert "cross.1.q" in got.arrays and "cross.0.q" not in got.arrays
    assert np.array_equal(got.arrays["cross.1.weights"], traced.trace.sublayer("cross", 1).weights)
    assert np.array_equal(got.arrays["memory"], traced.trace.memory)  # what every layer reads comes too


def test_the_lens_of_every_step_and_its_tokens(traced: TracedSentence) -> None:
    got = sent(traced, [0], query=None)
    assert got.header["selection"]["query"] is None  # the browser opens the kind's default token
    for step, lens in enumerate(traced.lenses):
        assert np.array_equal(got.arrays["lens.top_probs"][step], lens.top_probs)
        assert np.array_equal(got.arrays["lens.chosen_rank"][step], lens.chosen_rank)
        assert np.array_equal(got.arrays["lens.chosen_prob"][step], lens.chosen_prob)
        chosen = got.header["lens"]["chosen"][step]
        assert got.header["lens"]["top"][step][-1][0] == chosen == traced.steps[step].token  # greedy: the output's first
