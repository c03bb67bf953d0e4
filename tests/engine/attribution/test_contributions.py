"""The float64 copy behind ALTI+ and value zeroing: the same function, private to each use, dropped after it."""
from __future__ import annotations

import gc
import weakref
from contextlib import ExitStack

import torch

from attnscope.engine.attribution.contributions import float64_model
from attnscope.model.hooks import RESID_POST
from tests.engine_fixtures import no_hooks_left, random_source, tiny_model


def test_the_copy_computes_the_same_function_in_float64_without_the_models_hooks() -> None:
    model = tiny_model(0)
    src, tgt = torch.tensor([random_source(0)]), torch.tensor([[1, 5, 6, 7]])
    with ExitStack() as listening:
        model.decoder[0].hooks.listen(listening, RESID_POST, lambda out: out * 0)  # e.g. a head gate left on
        rng = torch.random.get_rng_state()
        with float64_model(model) as exact:
            assert torch.equal(torch.random.get_rng_state(), rng)  # building it drew no random numbers
            assert all(p.dtype == torch.float64 for p in exact.parameters()) and not exact.training
            assert no_hooks_left(exact)
            with torch.no_grad():
                got = exact(src, tgt)
    with torch.no_grad():
        want = model.double()(src, tgt)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_each_use_gets_a_private_copy_of_the_current_weights_dropped_after_the_block() -> None:
    model = tiny_model(1)
    with float64_model(model) as first:
        kept = weakref.ref(first)
    del first
    gc.collect()
    assert kept() is None  # nothing holds the copy once its block has ended
    with torch.no_grad():
        model.generator.bias[5] += 1.0  # a training step writes in place
    with float64_model(model) as renewed, float64_model(model) as other:
        assert renewed is not other
        assert renewed.generator.bias[5].item() == model.generator.bias[5].item()
