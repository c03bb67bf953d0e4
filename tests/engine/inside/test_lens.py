"""Logit lens: the last layer's lens is the model's own prediction, at every step, cached or not."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscope.engine.inside import lens as lens_module
from attnscope.engine.inside.lens import layer_logits, logit_lens, logit_lenses
from tests.engine.inside.inside_fixtures import Case


@pytest.mark.parametrize("which", ["cached", "full"])
def test_last_layer_is_the_models_prediction(case: Case, which: str) -> None:
    with torch.no_grad():
        logits = case.model(torch.tensor([case.source]), torch.tensor([case.prefix]))[0].numpy()  # (T, V)
    for position, chosen in enumerate(case.decoded.ids):
        by_layer = layer_logits(case.model, getattr(case, which), position)
        assert by_layer.shape == (len(case.model.decoder), case.model.config.tgt_vocab_size)
        assert np.abs(by_layer[-1] - logits[position]).max() <= 1e-5
        lens = logit_lens(case.model, getattr(case, which), position, chosen, k=3)
        assert lens.top_ids[-1, 0] == chosen and lens.chosen_rank[-1] == 1  # greedy chose the last layer's favourite
        assert np.allclose(lens.top_probs.sum(-1) <= 1 + 1e-6, True)
        assert np.all(lens.top_probs[:, :-1] >= lens.top_probs[:, 1:])


def test_rank_counts_the_tokens_ahead(case: Case) -> None:
    lens = logit_lens(case.model, case.cached, 0, chosen_id=5, k=4)
    for layer in range(lens.top_ids.shape[0]):
        probs = torch.from_numpy(layer_logits(case.model, case.cached, 0)[layer]).softmax(-1).numpy()
        assert lens.chosen_rank[layer] == 1 + int((probs > probs[5]).sum())
        assert abs(lens.chosen_prob[layer] - probs[5]) <= 1e-6
        if lens.chosen_rank[layer] <= 4:
            assert lens.top_ids[layer, lens.chosen_rank[layer] - 1] == 5


def test_position_out_of_range(case: Case) -> None:
    with pytest.raises(ValueError, match="target prefix has positions"):
        layer_logits(case.model, case.cached, len(case.prefix))


@pytest.mark.parametrize("chunk", [2, 64])
def test_every_steps_lens_at_once_is_each_ones_alone(case: Case, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """logit_lenses (chunks of positions, as the page computes them) gives logit_lens's numbers at every step."""
    monkeypatch.setattr(lens_module, "CHUNK", chunk)
    chosen = list(case.decoded.ids)
    every = logit_lenses(case.model, case.cached, chosen, k=3)
    assert [x.position for x in every] == list(range(len(chosen)))
    for position, together in enumerate(every):
        alone = logit_lens(case.model, case.cached, position, chosen[position], k=3)
        assert np.array_equal(together.top_ids, alone.top_ids) and np.array_equal(together.chosen_rank, alone.chosen_rank)
        assert np.abs(together.top_probs - alone.top_probs).max() <= 1e-6
        assert np.abs(together.chosen_prob - alone.chosen_prob).max() <= 1e-6
    with pytest.raises(ValueError, match="positions; asked for"):
        logit_lenses(case.model, case.cached, chosen + [0] * len(case.prefix))
