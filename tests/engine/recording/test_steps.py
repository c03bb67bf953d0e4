"""The one join of per-step rows (recording/steps.py), and greedy's rows: each is the very tensor its step computed."""
from __future__ import annotations

from contextlib import ExitStack

import pytest
import torch

from attnscope.engine.decoding.decode import greedy
from attnscope.engine.recording.steps import join_steps
from attnscope.model.hooks import PATTERN
from tests.engine_fixtures import random_source, tiny_model


def reference(steps: list[torch.Tensor], fill: float) -> torch.Tensor:
    """Row by row: the last query of each step (L, H, Q_t, K_t), right-padded with `fill`, as (L, H, T, K)."""
    n_keys = max(s.shape[-1] for s in steps)
    return torch.stack([torch.nn.functional.pad(s[:, :, -1], (0, n_keys - s.shape[-1]), value=fill) for s in steps], dim=2)


@pytest.mark.parametrize("queries", ["one per step (KV cache)", "whole prefix per step"])
@pytest.mark.parametrize("keys", ["growing (self-attention)", "fixed (cross-attention)"])
@pytest.mark.parametrize("fill", [0.0, float("-inf")])
def test_joined_rows_equal_the_padded_last_rows_of_every_step(queries: str, keys: str, fill: float) -> None:
    g = torch.Generator().manual_seed(0)
    n_layers, n_heads, n_steps, n_source = 3, 4, 6, 5
    steps = [torch.rand(n_layers, n_heads, 1 if queries.startswith("one") else t + 1,
                        t + 1 if keys.startswith("growing") else n_source, generator=g) for t in range(n_steps)]
    got = join_steps(steps, fill, last_query=True)
    assert torch.equal(got, reference(steps, fill))
    assert got.shape == (n_layers, n_heads, n_steps, n_steps if keys.startswith("growing") else n_source)


def test_joining_keeps_every_query_of_each_step() -> None:
    """A first step with a whole prompt, then one query a step: every query is a row, in order."""
    prompt, step = torch.rand(1, 2, 3, 3), torch.rand(1, 2, 1, 4)
    got = join_steps([prompt, step])
    assert got.shape == (1, 2, 4, 4)
    assert torch.equal(got[:, :, :3, :3], prompt) and not got[:, :, :3, 3].any() and torch.equal(got[:, :, 3:], step)


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_rows_are_bit_for_bit_the_weights_each_step_computed(use_cache: bool) -> None:
    """A listener keeps every call's weights; greedy's arrays, returned by the model, hold exactly those numbers."""
    model = tiny_model(1)
    seen: dict[str, list[torch.Tensor]] = {}
    with ExitStack() as listening:
        for name, m in model.attention_modules().items():
            m.hooks.listen(listening, PATTERN, lambda w, name=name: seen.setdefault(name, []).append(w.clone()))
        out = greedy(model, random_source(1), max_len=9, use_cache=use_cache)
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
