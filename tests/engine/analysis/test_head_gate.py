"""Head ablation by a scoped hook: equal to zeroing the head's weights, nothing left behind, thread-safe."""
from __future__ import annotations

import copy
import threading

import pytest
import torch

from attnscope.engine.analysis.head_gate import HeadKey, gate_heads
from attnscope.model.transformer import Transformer
from tests.engine_fixtures import no_hooks_left, tiny_model

SRC = torch.tensor([[5, 6, 7, 8, 9, 2]])
TGT = torch.tensor([[1, 10, 11, 12]])


def zeroed_copy(model: Transformer, heads: list[HeadKey]) -> Transformer:
    """An independent model whose output projections ignore those heads: their weight columns are zero."""
    other = copy.deepcopy(model)
    groups = {kind: list(modules.values()) for kind, modules in other.attention_by_kind().items()}
    dh = other.config.d_model // other.config.n_heads
    with torch.no_grad():
        for kind, layer, head in heads:
            groups[kind][layer].out_proj.weight[:, head * dh:(head + 1) * dh] = 0.0
    return other


def logits(model: Transformer) -> torch.Tensor:
    with torch.no_grad():
        return model(SRC, TGT)


@pytest.mark.parametrize("heads", [
    [("encoder", 0, 1)], [("decoder", 2, 3)], [("cross", 1, 0), ("cross", 1, 2)],
    [("encoder", 1, 0), ("decoder", 0, 2), ("cross", 2, 3)]])
def test_gating_equals_zeroing_the_heads_weights(heads: list[HeadKey]) -> None:
    model = tiny_model(0)
    base = logits(model)
    with gate_heads(model, heads):
        gated = logits(model)
    assert torch.allclose(gated, logits(zeroed_copy(model, heads)), atol=1e-5)
    assert not torch.allclose(gated, base, atol=1e-4)  # the heads mattered
    assert torch.equal(logits(model), base)  # and are back after the block


def test_no_heads_change_nothing_and_every_cross_head_off_blinds_the_decoder() -> None:
    model = tiny_model(1)
    with gate_heads(model, []):
        assert torch.equal(logits(model), logits(tiny_model(1)))
    other = torch.tensor([[9, 9, 8, 7, 6, 2]])
    every_cross = [("cross", layer, h) for layer in range(3) for h in range(4)]
    with gate_heads(model, every_cross), torch.no_grad():
        assert torch.allclose(model(SRC, TGT), model(other, TGT), atol=1e-6)  # the source cannot matter


def test_nothing_is_left_on_the_model_also_after_an_exception() -> None:
    model = tiny_model(0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    attributes = {name: set(vars(m)) for name, m in model.named_modules()}
    with pytest.raises(RuntimeError, match="boom"):
        with gate_heads(model, [("cross", 0, 0)]):
            assert not no_hooks_left(model)
            raise RuntimeError("boom")
    with pytest.raises(ValueError, match="no encoder layer 5 head 0"):
        with gate_heads(model, [("cross", 0, 1), ("encoder", 5, 0)]):
            pass
    assert no_hooks_left(model)
    assert {name: set(vars(m)) for name, m in model.named_modules()} == attributes
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_two_threads_ablating_different_heads_do_not_interfere() -> None:
    model = tiny_model(2)
    plans = {0: [("cross", 0, 1)], 1: [("decoder", 1, 2), ("encoder", 0, 3)]}
    want = {i: logits(zeroed_copy(model, heads)) for i, heads in plans.items()}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def session(i: int) -> None:
        try:
            start.wait()
            for _ in range(30):
                with gate_heads(model, plans[i]):
                    got = logits(model)
                assert torch.allclose(got, want[i], atol=1e-5), i
        except BaseException as err:  # re-raised in the main thread
            errors.append(err)

    threads = [threading.Thread(target=session, args=(i,)) for i in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert no_hooks_left(model)
