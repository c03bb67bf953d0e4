"""relative_bias(): each head's learned bias by offset key − query, as the model adds it to its scores."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attnscope.engine.inside.relative import relative_bias, shared_from, span
from attnscope.model.positions import relative_bucket
from tests.engine_fixtures import T5, tiny_model


@pytest.fixture(scope="module")
def model():
    return tiny_model(0, **(T5 | dict(relative_buckets=16, relative_max_distance=12)))


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_the_bias_is_the_table_row_of_each_offsets_bucket(model, stack: str) -> None:
    bias = relative_bias(model, stack, span(model))
    layer = (model.encoder if stack == "encoder" else model.decoder)[0].relative_bias
    table = layer.table.weight.detach().numpy()  # (buckets, heads)
    for i, offset in enumerate(bias.offsets):
        bucket = relative_bucket(torch.tensor(int(offset)), 16, 12, stack == "encoder")
        assert bias.buckets[i] == int(bucket)
        assert np.array_equal(bias.bias[:, i], table[int(bucket)])
    assert bias.offsets.max() == (span(model) if stack == "encoder" else 0) and bias.offsets.min() == -span(model)


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_the_bias_is_what_the_model_adds_to_its_scores(model, stack: str) -> None:
    """Row q of the model's own (1, H, Q, K) bias holds, at key k, the bias drawn for offset k − q."""
    n = 9
    made = (model.encoder if stack == "encoder" else model.decoder)[0].relative_bias(n, n)[0].detach().numpy()
    bias = relative_bias(model, stack, n - 1)
    column = {int(o): i for i, o in enumerate(bias.offsets)}
    for q in range(n):
        for k in range(n if stack == "encoder" else q + 1):
            assert np.array_equal(made[:, q, k], bias.bias[:, column[k - q]])


def test_buckets_exact_then_logarithmic(model) -> None:
    """Encoder: 8 buckets a direction, 4 exact (offsets 0..3 away), the rest widening up to distance 12."""
    ranges = {r.bucket: r for r in relative_bias(model, "encoder", span(model)).ranges}
    assert [ranges[b].offsets for b in range(4)] == ["0", "−1", "−2", "−3"] and all(ranges[b].exact for b in range(4))
    assert [ranges[b].offsets for b in range(9, 12)] == ["1", "2", "3"]
    assert not ranges[4].exact and ranges[7].open_ended and ranges[7].offsets.startswith("≤ −")
    assert ranges[15].open_ended and ranges[15].offsets.startswith("≥ ")
    assert ranges[15].first <= 12 and not ranges[14].open_ended
    decoder = {r.bucket: r for r in relative_bias(model, "decoder", span(model)).ranges}
    assert all(decoder[b].exact for b in range(8)) and not decoder[8].exact and decoder[15].open_ended


def test_span_reaches_past_where_the_bias_stops_changing_within_the_model(model) -> None:
    reach = max(shared_from(model, "encoder"), shared_from(model, "decoder"))
    assert reach < span(model) <= model.config.max_len - 1


@pytest.mark.parametrize(("buckets", "max_distance", "encoder", "decoder"), [(32, 128, 91, 113), (16, 12, 10, 12)])
def test_the_last_bucket_starts_where_the_bucketing_function_puts_it(buckets: int, max_distance: int, encoder: int,
                                                                      decoder: int) -> None:
    """t5-small's 32 buckets up to 128: the encoder's last bucket starts at 91, not at max_distance."""
    model = tiny_model(0, **(T5 | dict(relative_buckets=buckets, relative_max_distance=max_distance, max_len=256)))
    assert (shared_from(model, "encoder"), shared_from(model, "decoder")) == (encoder, decoder)
    for stack, start in (("encoder", encoder), ("decoder", decoder)):
        bias = relative_bias(model, stack, start + 5)
        ahead = bias.buckets[bias.offsets <= -start]
        assert (ahead == ahead[0]).all() and bias.buckets[bias.offsets == -(start - 1)][0] != ahead[0]


def test_a_model_without_relative_positions_says_so() -> None:
    with pytest.raises(ValueError, match="no relative position bias"):
        relative_bias(tiny_model(0), "encoder", 4)
