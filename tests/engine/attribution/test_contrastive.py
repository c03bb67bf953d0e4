"""Contrastive attributions: the difference of two tokens' gradients, complete integrated gradients, clear errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscope.engine.attribution.contrastive import (
    CONTRASTIVE_GRADIENT,
    CONTRASTIVE_INTEGRATED,
    Contrast,
    contrastive_saliency,
    translation_contrast,
)
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.registry import names
from attnscope.engine.attribution.saliency import saliency
from attnscope.engine.attribution.sentence import attribute
from attnscope.engine.recording.trace import decoder_inputs
from tests.attribution_fixtures import T5_MODEL, pair, tiny
from tests.engine_fixtures import tiny_translator


def log_prob_difference(model, src, tgt, t: int, foil: int) -> float:
    """log p(tgt[t]) - log p(foil) at step t, from the model's own teacher-forced forward pass."""
    with torch.no_grad():
        logits = model(torch.tensor([src]), torch.tensor([decoder_inputs(tgt, model.config.bos_id)]))[0, t]
    lp = logits.log_softmax(-1)
    return float(lp[tgt[t]] - lp[foil])


@pytest.mark.parametrize("t5", [False, True])
def test_gradient_times_input_is_the_token_s_minus_the_foil_s(t5: bool) -> None:
    model = tiny(3, **(T5_MODEL if t5 else {}))
    src, tgt = pair(3)
    t, foil = 3, 7
    got = contrastive_saliency(model, src, tgt, Contrast(t, foil))
    chosen, rival = saliency(model, src, tgt), saliency(model, src, [*tgt[:t], foil, *tgt[t + 1:]])  # a linear identity
    np.testing.assert_allclose(got.source[0], chosen.source[t] - rival.source[t], atol=1e-10)
    np.testing.assert_allclose(got.prefix[0], (chosen.prefix[t] - rival.prefix[t])[: t + 1], atol=1e-10)
    assert got.prefix.shape == (1, t + 1)  # the decoder inputs step t reads: <bos> y_1 .. y_t-1
    assert got.score[0] == pytest.approx(log_prob_difference(model, src, tgt, t, foil), abs=1e-10)


@pytest.mark.parametrize("tolerance", [0.05, 0.002])
def test_integrated_gradients_add_up_to_the_change_of_the_difference(tolerance: float) -> None:
    model = tiny(4)
    src, tgt = pair(4)
    for t, foil in ((0, 5), (2, 11), (4, 20)):
        ig = contrastive_saliency(model, src, tgt, Contrast(t, foil), IGSettings(tolerance=tolerance, max_points=512))
        assert ig.complete.all()
        change = ig.score - ig.baseline_score
        assert abs(ig.total[0] - change[0]) <= tolerance * max(abs(change[0]), 1.0)
        assert ig.score[0] == pytest.approx(log_prob_difference(model, src, tgt, t, foil), abs=1e-10)


def test_a_contrast_that_cannot_be_explained_says_what_to_do() -> None:
    model = tiny(1)
    src, tgt = pair(1)
    with pytest.raises(ValueError, match="is the token the step chose"):
        contrastive_saliency(model, src, tgt, Contrast(1, tgt[1]))
    with pytest.raises(ValueError, match="pick one from 0 to 5"):
        contrastive_saliency(model, src, tgt, Contrast(6, 3))
    with pytest.raises(ValueError, match="outside the target vocabulary"):
        contrastive_saliency(model, src, tgt, Contrast(1, 29))
    forced = tiny(1, forced_first=4)
    with pytest.raises(ValueError, match="forces its first token"):
        contrastive_saliency(forced, src, tgt, Contrast(0, 5))


def test_attribute_with_a_contrast_carries_both_methods_beside_the_token_s() -> None:
    tr = tiny_translator(0, eos_bias=2.0)
    result = tr.translate("a b c d")
    foil = next(i for i in result.steps[1].top_ids if i != result.target_ids[1])
    settings = IGSettings(max_points=64)
    att = attribute(tr, result, settings, contrast=Contrast(1, foil))
    assert list(att.contrastive()) == list(names("contrast")) == [CONTRASTIVE_GRADIENT, CONTRASTIVE_INTEGRATED]
    assert CONTRASTIVE_GRADIENT not in att.source_maps(0)  # the sentence's maps explain every token alone
    alone = translation_contrast(tr, result, Contrast(1, foil))
    np.testing.assert_allclose(att.contrastive()[CONTRASTIVE_GRADIENT].source, alone.source, rtol=1e-6, atol=1e-7)
    assert att.contrastive()[CONTRASTIVE_INTEGRATED].complete.all()
    assert attribute(tr, result).contrastive() == {}


def test_the_package_api_takes_a_typed_word_as_the_foil() -> None:
    import attnscope

    tr = tiny_translator(0, eos_bias=2.0)
    result = tr.translate("a b c d")
    word = next(w for w in "abcdefgh" if tr.bundle.tgt_codec.encode(w)[0] != result.target_ids[1])
    contrast = attnscope.Contrast.word(tr, 1, word)
    assert contrast == Contrast(1, tr.bundle.tgt_codec.encode(word)[0])
    att = attnscope.attribute(tr, result, contrast=contrast)
    np.testing.assert_allclose(att.contrastive()[CONTRASTIVE_GRADIENT].source,
                               translation_contrast(tr, result, contrast).source, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="not in the target vocabulary"):
        attnscope.Contrast.word(tr, 1, "zzzq")
