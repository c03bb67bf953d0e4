"""The issue's journey on the shipped en-de model: "Mädchen" at step 2, every kind of attention."""
from __future__ import annotations

import numpy as np
import pytest

import attnscope
from attnscope.engine.inside.head_view import head_view
from attnscope.engine.inside.lens import logit_lens
from attnscope.engine.inside.traced import forward_trace, sentence_trace
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.engine.recording.tracer import trace


@pytest.fixture(scope="module")
def girl():
    tr = attnscope.load()
    result = tr.translate("A girl is playing in the park.")
    assert result.target_tokens[:3] == ("<bos>", "Ein", "Mädchen"), result.target_tokens
    with tr.inference():
        whole = sentence_trace(tr.model, result.source_ids, decoder_inputs(result.target_ids, tr.model.config.bos_id))
    return tr, result, whole.until(2)


def test_the_teacher_forced_trace_is_the_decode_at_every_step() -> None:
    """The page's one teacher-forced pass against the heatmaps recorded while decoding, every step and head."""
    tr = attnscope.load()
    result = tr.translate("Two young men are playing football on a green field near the old church.")
    with tr.inference():
        whole = sentence_trace(tr.model, result.source_ids, decoder_inputs(result.target_ids, tr.model.config.bos_id))
        inputs = decoder_inputs(result.target_ids, tr.model.config.bos_id)
        cached = forward_trace(trace(tr.model, result.source_ids, inputs, use_cache=True))
    assert not whole.use_cache and len(whole.target_ids) == len(result.target_ids) > 10
    for kind in ("encoder", "decoder", "cross"):
        for layer in range(tr.model.config.n_decoder_layers):
            recorded = result.attention.array(kind)[layer]
            mine = whole.sublayer(kind, layer).weights
            assert np.abs(mine - recorded[:, : mine.shape[1], : mine.shape[2]]).max() <= 1e-5  # float32 rounding
            assert np.abs(mine - cached.sublayer(kind, layer).weights).max() <= 1e-5
    assert np.abs(whole.logits - cached.logits).max() <= 1e-4


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_maedchen_at_step_2_matches_the_heatmap_rows(girl, kind: str) -> None:
    tr, result, tr_step = girl
    query = 1 if kind == "encoder" else 2  # "girl" in the source, "Mädchen" as the decoder's input at step 2
    for layer in range(3):
        for head in range(tr.model.config.n_heads):
            view = head_view(tr_step, kind, layer, head, query, result.source_tokens, result.target_tokens[:3])
            assert view.gap_to(result.attention) <= 1e-6  # the number the page shows
            assert np.abs(view.contributions.sum(0) + view.out_bias - view.attention_output).max() <= 1e-4
    assert view.query_tokens[query] in ("girl", "Mädchen")


def test_logit_lens_at_step_2_ends_on_the_chosen_word(girl) -> None:
    tr, result, tr_step = girl
    lens = logit_lens(tr.model, tr_step, 2, result.steps[2].token_id)
    assert lens.chosen_rank[-1] == 1
    assert abs(lens.chosen_prob[-1] - result.steps[2].prob) <= 1e-5


def test_the_french_models_learned_positions_are_not_rotations() -> None:
    from attnscope.checkpoints.registry import shipped_dir
    from attnscope.engine.inside.anatomy import model_positions
    from attnscope.engine.inside.offsets import offset_errors, rotation_check

    tr = attnscope.load(shipped_dir() / "multi30k-en-fr.safetensors")
    errors = offset_errors(model_positions(tr.model, 64), [1, 3, 8])
    assert np.all(errors > 0.05)  # measured: learned offsets are far from a rotation (sinusoids: < 1e-5)
    de = attnscope.load()
    assert rotation_check(model_positions(de.model, 64), 3).max_error <= 1e-5
