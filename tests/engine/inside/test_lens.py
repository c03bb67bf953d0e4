"""Logit lens: the last layer's lens is the model's own prediction, at every step, cached or not."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscope.engine.inside.lens import layer_logits, logit_lens
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
