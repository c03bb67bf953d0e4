"""head_view(): one head and one query; every breakdown adds up to what the model computed."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.engine.inside.head_view import head_view
from tests.engine.inside.inside_fixtures import Case


def tokens(case: Case) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(f"s{i}" for i in case.source), tuple(f"t{i}" for i in case.prefix)


def every_view(case: Case, which: str = "cached"):
    tr = getattr(case, which)
    src, tgt = tokens(case)
    for kind, layer in sorted(tr.sublayers):
        n_queries = len(src) if kind == "encoder" else len(tgt)
        for head in range(case.model.config.n_heads):
            for query in range(n_queries):
                yield head_view(tr, kind, layer, head, query, src, tgt)


@pytest.mark.parametrize("which", ["cached", "full"])
def test_softmax_row_is_the_recorded_row(case: Case, which: str) -> None:
    recorded = {"encoder": case.decoded.encoder, "decoder": case.decoded.decoder, "cross": case.decoded.cross}
    for view in every_view(case, which):
        row = recorded[view.kind][view.layer, view.head, view.query].numpy()
        assert np.abs(view.weights - row).max() <= 1e-6


def test_each_step_adds_up(case: Case) -> None:
    for v in every_view(case):
        live = ~v.masked
        assert np.array_equal(v.products.sum(-1), v.dots)
        bias = 0 if v.bias is None else v.bias[live]
        assert np.abs(v.dots[live] * v.scale + bias - v.scores[live]).max() <= 1e-5  # Eq. 1: q·k / √d_k (+ T5's bias)
        assert np.all(np.isneginf(v.scores[v.masked])) and np.all(v.weights[v.masked] == 0)
        assert np.abs(v.weighted.sum(0) - v.head_output).max() <= 1e-5  # Σ_j weight_j · v_j
        start, stop = v.head_slice
        assert np.array_equal(v.concat[start:stop], v.head_output)
        out_bias = 0 if v.out_bias is None else v.out_bias
        assert np.abs(v.contributions.sum(0) + out_bias - v.attention_output).max() <= 1e-5  # Concat · W^O
        assert np.array_equal(v.contribution, v.contributions[v.head])


@pytest.mark.parametrize("which", ["cached", "full"])
def test_the_steps_shown_recompute_the_models_weights(case: Case, which: str) -> None:
    """softmax(q·k × scale + bias + mask), from the numbers the page shows, is the attention the model computed."""
    recorded = {"encoder": case.decoded.encoder, "decoder": case.decoded.decoder, "cross": case.decoded.cross}
    for v in every_view(case, which):
        assert np.abs(v.recomputed_weights - recorded[v.kind][v.layer, v.head, v.query].numpy()).max() <= 1e-6
        assert np.array_equal(np.isneginf(v.recomputed_scores), v.masked)


def test_scale_and_position_bias_are_the_models(case: Case) -> None:
    """1/√d_k unless the model leaves it out (T5); a position bias in self-attention exactly where the model has one,
    the row of the stack's bias for this query, read off the table by each key's offset."""
    c = case.model.config
    for v in every_view(case):
        assert v.scale == (v.q.size ** -0.5 if c.scale_scores else 1.0)
        assert (v.bias is not None) == (c.positional == "relative" and v.kind != "cross") == (v.relative and v.kind != "cross")
        if v.bias is not None:
            stack = case.model.encoder if v.kind == "encoder" else case.model.decoder
            n = len(v.key_tokens)
            table = stack[0].relative_bias(n, n)[0, v.head, v.query].detach().numpy()
            assert np.array_equal(v.bias[~v.masked], table[~v.masked])
        assert (v.out_bias is None) == (not c.out_bias)
        assert v.norm_kind == ("RMSNorm" if c.layer_norm == "rms" else "LayerNorm")


def test_mask_row_and_matrix(case: Case) -> None:
    for v in every_view(case):
        n_q, n_k = v.mask_matrix.shape
        want = np.triu(np.ones((n_q, n_k), bool), 1) if v.kind == "decoder" else np.zeros((n_q, n_k), bool)
        assert np.array_equal(v.mask_matrix, want)
        assert np.array_equal(v.masked, want[v.query])


def test_inputs_of_the_head(case: Case) -> None:
    for v in every_view(case):
        s = case.cached.sublayer(v.kind, v.layer)
        assert np.array_equal(v.layer_input, s.residual[v.query])
        assert np.array_equal(v.query_input, (s.norm_output if v.norm == "pre" else s.residual)[v.query])
        if v.kind == "cross":
            assert np.array_equal(v.key_inputs, case.cached.memory)
        if v.layer == 0 and v.kind != "cross":
            assert np.array_equal(v.embedding.total, v.layer_input)
        assert v.key_tokens[0] == ("t1" if v.kind == "decoder" else f"s{case.source[0]}")


def test_out_of_range_choices_say_what_exists(case: Case) -> None:
    src, tgt = tokens(case)
    with pytest.raises(ValueError, match="heads 0..3"):
        head_view(case.cached, "encoder", 0, 4, 0, src, tgt)
    with pytest.raises(ValueError, match="query positions 0.."):
        head_view(case.cached, "cross", 0, 0, len(tgt), src, tgt)
    with pytest.raises(ValueError, match="layers 0..1"):
        head_view(case.cached, "encoder", 2, 0, 0, src, tgt)
    with pytest.raises(ValueError, match="tokens give"):
        head_view(case.cached, "decoder", 0, 0, 0, src, tgt[:-1])
