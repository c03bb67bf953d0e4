"""Saliency against finite differences, and integrated gradients' completeness."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscope.engine.internals import decoder_inputs
from attnscope.engine.saliency import saliency, translation_saliency
from tests.attribution_fixtures import pair, tiny
from tests.engine_fixtures import tiny_translator


def log_prob_with(model, src, tgt, side: int, j: int, factor: float) -> np.ndarray:
    """f_t for every t when token j's embedding on one side (0 source, 1 target) is multiplied by `factor`."""
    calls = []

    def hook(_m, _i, out):
        calls.append(1)
        if len(calls) - 1 == side:
            out = out.clone()
            out[:, j] *= factor
        return out

    modules = {id(m): m for m in (model.src_embed, model.tgt_embed)}.values()
    handles = [m.register_forward_hook(hook) for m in modules]
    try:
        with torch.no_grad():
            logits = model(torch.tensor([src]), torch.tensor([decoder_inputs(tgt)]))[0]
    finally:
        for h in handles:
            h.remove()
    return logits.log_softmax(-1)[torch.arange(len(tgt)), torch.tensor(tgt)].numpy()


@pytest.mark.parametrize("shared", [False, True])
def test_gradient_times_input_equals_finite_differences(shared: bool) -> None:
    kw = dict(share_embeddings=True, src_vocab_size=29) if shared else {}
    model = tiny(5, **kw)
    src, tgt = pair(5)
    got = saliency(model, src, tgt)
    eps = 1e-5
    for side, n in ((0, len(src)), (1, len(tgt))):
        for j in range(n):
            # d/de f(x with token j scaled by 1+e) at 0 is sum_d x_jd df/dx_jd: gradient × input of token j
            fd = (log_prob_with(model, src, tgt, side, j, 1 + eps) - log_prob_with(model, src, tgt, side, j, 1 - eps)) / (2 * eps)
            column = got.source[:, j] if side == 0 else got.prefix[:, j]
            np.testing.assert_allclose(column, fd, atol=1e-7)


def test_integrated_gradients_are_complete() -> None:
    model = tiny(6)
    src, tgt = pair(6)
    coarse, ig = saliency(model, src, tgt, steps=25), saliency(model, src, tgt, steps=400)
    gap = lambda s: np.abs(s.total - (s.score - s.baseline_score)).max()  # noqa: E731
    # ReLU kinks make the path integrand piecewise smooth: the midpoint rule converges as 1/steps
    assert gap(ig) < 1e-3 and gap(ig) < gap(coarse) / 8
    assert np.all(np.triu(ig.prefix, k=1) == 0)  # a token never depends on later decoder inputs


def test_one_step_is_the_gradient_at_half_the_input() -> None:
    model = tiny(7)
    src, tgt = pair(7)
    half = saliency(model, src, tgt, steps=1)  # midpoint rule: alpha = 0.5 only
    calls = []

    def hook(_m, _i, out):
        calls.append(1)
        return out * 0.5

    handles = [m.register_forward_hook(hook) for m in (model.src_embed, model.tgt_embed)]
    try:
        emb = {}

        def grab(_m, _i, out):
            out.retain_grad()
            emb.setdefault("src" if "src" not in emb else "tgt", out)
        handles += [m.register_forward_hook(grab) for m in (model.src_embed, model.tgt_embed)]
        logits = model(torch.tensor([src]), torch.tensor([decoder_inputs(tgt)]))[0]
        lp = logits.log_softmax(-1)[2, tgt[2]]
        lp.backward()
    finally:
        for h in handles:
            h.remove()
    x_src = emb["src"].detach() * 2  # the hook halved it
    np.testing.assert_allclose(half.source[2], (emb["src"].grad * x_src)[0].sum(-1).numpy(), atol=1e-10)


def test_translation_saliency_shapes_and_bad_steps() -> None:
    tr = tiny_translator(0, eos_bias=2.0)
    result = tr.translate("a b c")
    sal = translation_saliency(tr, result, steps=4)
    assert sal.source.shape == (len(result.target_ids), len(result.source_ids))
    assert sal.method == "integrated gradients (4 steps)"
    with pytest.raises(ValueError, match="steps"):
        translation_saliency(tr, result, steps=0)
    assert all(not m._forward_hooks for m in tr.model.modules())
