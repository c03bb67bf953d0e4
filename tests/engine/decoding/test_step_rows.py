"""Greedy decoding's rows are assembled once, after the loop: each is the very tensor its step's hook saw."""
from __future__ import annotations

import pytest
import torch

from attnscope.engine.decoding.decode import greedy, step_rows
from tests.engine_fixtures import random_source, tiny_model


def reference(calls_per_layer: list[list[torch.Tensor]]) -> torch.Tensor:
    """Row by row, as the loop used to do it: the last query of each call, right-padded with zeros."""
    n_keys = max(c.shape[-1] for calls in calls_per_layer for c in calls)
    return torch.stack([torch.stack([torch.nn.functional.pad(c[0, :, -1], (0, n_keys - c.shape[-1])) for c in calls], dim=1)
                        for calls in calls_per_layer])


@pytest.mark.parametrize("queries", ["one per step (KV cache)", "whole prefix per step"])
@pytest.mark.parametrize("keys", ["growing (self-attention)", "fixed (cross-attention)"])
def test_step_rows_equal_the_padded_last_rows_of_every_call(queries: str, keys: str) -> None:
    g = torch.Generator().manual_seed(0)
    n_layers, n_heads, n_steps, n_source = 3, 4, 6, 5
    calls = [[torch.rand(1, n_heads, 1 if queries.startswith("one") else t + 1,
                         t + 1 if keys.startswith("growing") else n_source, generator=g) for t in range(n_steps)]
             for _ in range(n_layers)]
    got = step_rows(calls)
    assert torch.equal(got, reference(calls))
    assert got.shape == (n_layers, n_heads, n_steps, n_steps if keys.startswith("growing") else n_source)


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_rows_are_bit_for_bit_the_weights_each_step_computed(use_cache: bool) -> None:
    """A second hook beside the recorder's keeps every call; greedy's arrays hold exactly those numbers."""
    model = tiny_model(1)
    seen: dict[str, list[torch.Tensor]] = {}
    handles = [m.hook_pattern.register_forward_hook(lambda _m, _a, w, name=name: seen.setdefault(name, []).append(w.clone()))
               for name, m in model.attention_modules().items()]
    try:
        out = greedy(model, random_source(1), max_len=9, use_cache=use_cache)
    finally:
        for h in handles:
            h.remove()
    names = model.attention_by_kind()
    for kind, recorded in (("decoder", out.decoder), ("cross", out.cross)):
        for layer, name in enumerate(names[kind]):
            assert len(seen[name]) == len(out.ids)
            for t, call in enumerate(seen[name]):
                row = call[0, :, -1]
                assert torch.equal(recorded[layer, :, t, : row.shape[-1]], row), (name, t)
                assert not recorded[layer, :, t, row.shape[-1]:].any()
    for layer, name in enumerate(names["encoder"]):
        assert torch.equal(out.encoder[layer], seen[name][0][0])
