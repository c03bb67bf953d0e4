"""ui.selection: the one place that fits the sidebar's layer and head, and the decoding step, to what is shown."""
from __future__ import annotations

import pytest

from attnscope.ui import selection
from attnscope.ui.state import ViewState
from tests.record_fixtures import pattern_record


@pytest.mark.parametrize("stored, n_layers, fitted", [(0, 3, 0), (2, 3, 2), (5, 3, 2), (5, 1, 0), (-1, 3, 0)])
def test_the_layer_is_clamped_to_the_model(stored: int, n_layers: int, fitted: int) -> None:
    assert selection.fit_layer(ViewState(layer=stored), n_layers) == fitted


def test_the_layer_is_fitted_per_kind_of_a_record() -> None:
    record = pattern_record(layers=2)
    assert selection.layer(ViewState(layer=7), record, "encoder") == 1 == record.n_layers("encoder") - 1


@pytest.mark.parametrize("stored, n_heads, shown", [(None, 4, None), (2, 4, 2), (3, None, 3), (4, 4, None), (9, 2, None)])
def test_a_head_the_model_lacks_is_the_mean_of_heads(stored: int | None, n_heads: int | None, shown: int | None) -> None:
    assert selection.head(ViewState(head=stored), n_heads) == shown


@pytest.mark.parametrize("stored, n_steps, fitted", [(0, 5, 0), (4, 5, 4), (9, 5, 4), (-2, 5, 0), (3, 1, 0)])
def test_the_step_is_clamped_to_the_translation(stored: int, n_steps: int, fitted: int) -> None:
    assert selection.fit_step(ViewState(step=stored), n_steps) == fitted
