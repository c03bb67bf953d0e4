"""The float64 pass behind ALTI+ and value zeroing, one layer at a time: the numbers of a whole float64 copy, at most
one layer's float64 weights alive at once whatever the depth, nothing of the shared model's hooks or dtype touched."""
from __future__ import annotations

import copy
import gc
from contextlib import ExitStack

import numpy as np
import pytest
import torch

from attnscope.engine.attribution import alti, exact_pass, value_zeroing
from attnscope.engine.attribution.contributions import Mixing
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.engine.recording.tracer import trace
from attnscope.model import budget
from attnscope.model.hooks import RESID_POST
from attnscope.model.transformer import Transformer
from tests.attribution_fixtures import T5_MODEL
from tests.engine_fixtures import no_hooks_left, random_source, tiny_model

MIXINGS = (alti.MIXING, value_zeroing.MIXING)
SHAPES = {"pre-LN": dict(norm="pre"), "post-LN, final norms": dict(norm="post", final_norm=True),
          "T5": dict(T5_MODEL, final_norm=True), "learned positions, embedding norm": dict(positional="learned",
                                                                                           embed_norm=True),
          "shared, untied": dict(share_embeddings=True, tie_embeddings=False)}


def _whole_copy(model: Transformer, src: list[int], prefix: list[int]) -> list:
    """What the Attribution page computed before: every method from one trace of a float64 copy of the whole model."""
    whole = copy.deepcopy(model).double().eval()
    traced = trace(whole, src, prefix)
    return [m.from_trace(traced) for m in MIXINGS]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_one_layer_at_a_time_equals_the_whole_float64_copy(shape: str) -> None:
    model = tiny_model(3, n_encoder_layers=3, n_decoder_layers=2, **SHAPES[shape])
    src, prefix = random_source(3, 7), decoder_inputs(random_source(4, 5), model.config.bos_id)
    got = exact_pass.contributions(model, src, prefix, MIXINGS)
    for g, want in zip(got, _whole_copy(model, src, prefix), strict=True):
        assert g.method == want.method
        for part in ("encoder_layers", "decoder_layers", "encoder_rollout", "decoder_rollout"):
            np.testing.assert_allclose(getattr(g, part), getattr(want, part), rtol=0, atol=1e-12, err_msg=part)
    assert next(model.parameters()).dtype == torch.float32 and no_hooks_left(model)


def _float64_alive() -> int:
    """Numbers held by the float64 parameters alive on the CPU now (freed ones are gone: nothing here makes cycles)."""
    return sum(o.numel() for o in gc.get_objects()
               if type(o) is torch.nn.Parameter and o.dtype == torch.float64 and o.device.type == "cpu")


def _peak(layers: int) -> tuple[int, int]:
    """(most float64 parameter numbers alive while a layer is read, the model's largest layer) for a model that deep."""
    model = tiny_model(4, n_encoder_layers=layers, n_decoder_layers=layers)
    seen: list[int] = []

    def counted(read):
        return lambda lt: (seen.append(_float64_alive()), read(lt))[1]
    probe = Mixing("probe", counted(alti.MIXING.encoder), counted(alti.MIXING.decoder))
    before = _float64_alive()
    exact_pass.contributions(model, [5, 6, 7, 3], [2, 8, 9], [probe])
    assert len(seen) == 2 * layers and _float64_alive() == before  # nothing left once it returns
    return max(seen) - before, exact_pass.largest_layer(model)


def test_the_float64_weights_alive_at_once_are_one_layer_and_the_small_outer_parts_whatever_the_depth() -> None:
    shallow, layer = _peak(1)
    deep, _ = _peak(4)
    assert deep == shallow  # no more float64 weights alive for four layers a side than for one
    assert layer <= deep < 2 * layer  # one layer (the decoder's) and the final norms and positions, not the model


def test_a_listener_on_the_shared_model_does_not_reach_the_pass() -> None:
    model = tiny_model(5)
    src, prefix = [5, 6, 7, 8, 3], [2, 9, 10]
    want = exact_pass.contributions(model, src, prefix, MIXINGS)
    with ExitStack() as listening:
        model.decoder[0].hooks.listen(listening, RESID_POST, lambda out: out * 0)  # e.g. a head gate left on
        rng = torch.random.get_rng_state()
        got = exact_pass.contributions(model, src, prefix, MIXINGS)
        assert torch.equal(torch.random.get_rng_state(), rng)  # building the layers drew no random numbers
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.decoder_rollout, w.decoder_rollout)


def test_the_refusal_is_decided_by_one_layer_not_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny_model(6, n_encoder_layers=6, n_decoder_layers=6)
    layer = exact_pass.largest_layer(model) * 8 * budget.HEADROOM
    monkeypatch.setattr(budget, "available_bytes", lambda: int(2 * layer))  # one layer fits, the whole model would not
    assert sum(p.numel() for p in model.parameters()) * 8 > 2 * layer
    assert exact_pass.float64_refusal(model) is None
    monkeypatch.setattr(budget, "available_bytes", lambda: int(layer / 2))
    refused = exact_pass.float64_refusal(model)
    assert refused and refused.startswith("the float64 copy of one layer that value zeroing and ALTI+ need has "
                                          f"{exact_pass.largest_layer(model):,} weights")
    with pytest.raises(MemoryError, match="one layer"):
        exact_pass.contributions(model, [5, 6, 3], [2, 7], MIXINGS)
