"""Offsets as linear maps: exact rotations for sinusoids, a measured misfit for learned tables."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.engine.inside.anatomy import model_positions
from attnscope.engine.inside.offsets import fit_offset_map, offset_errors, rotation_check
from attnscope.model.positions import sinusoidal_table
from tests.engine_fixtures import tiny_model


@pytest.mark.parametrize("d_model", [16, 64, 256])
@pytest.mark.parametrize("offset", [1, 3, 17])
def test_sinusoid_offsets_are_rotations(d_model: int, offset: int) -> None:
    table = sinusoidal_table(64, d_model).numpy()
    check = rotation_check(table, offset)
    assert check.max_error <= 1e-5
    assert check.predicted.shape == check.actual.shape == (64 - offset, d_model)
    r = check.rotations
    assert np.allclose(r @ r.transpose(0, 2, 1), np.eye(2), atol=1e-12)  # each 2x2 block is a rotation
    assert np.allclose(np.linalg.det(r), 1.0)


@pytest.mark.parametrize("layout", ["halves", "fairseq"])
def test_tables_in_sin_cos_halves_are_rotations_in_their_own_layout(layout: str) -> None:
    """Marian's and fairseq's [sin | cos] tables: each pair is dimensions i and i + D/2, at the layout's frequencies
    (checked as the paper's layout, they miss by whole units)."""
    table = sinusoidal_table(64, 32, layout).numpy()
    check = rotation_check(table, 3, layout)
    assert check.max_error <= 1e-5 and check.dimensions(2) == (2, 18)
    assert rotation_check(table, 3).max_error > 0.5
    assert np.array_equal(check.before[:, 4:6], table[:-3, [2, 18]])


def test_the_rotation_check_sees_a_wrong_table() -> None:
    table = sinusoidal_table(64, 16).numpy()
    table[10, 4] += 0.1
    assert rotation_check(table, 2).max_error >= 0.09
    assert rotation_check(table, 2).pair_errors.argmax() == 2


def test_best_orthogonal_map_fits_sinusoids_and_not_noise() -> None:
    table = sinusoidal_table(64, 32).numpy()
    fit = fit_offset_map(table, 5)
    assert fit.relative_error <= 1e-5
    assert np.allclose(fit.matrix @ fit.matrix.T, np.eye(32), atol=1e-9)
    noise = np.random.default_rng(0).normal(size=(64, 32))
    assert offset_errors(noise, [1, 5]).min() >= 0.5


def test_learned_positions_are_measured_not_assumed() -> None:
    model = tiny_model(0, positional="learned")
    table = model_positions(model, 32)
    errors = offset_errors(table, [1, 2, 4])
    assert np.all((errors > 0.1) & (errors < 2.0))  # random init: far from a rotation, and the number says so


def test_bad_offsets_and_tables_are_refused() -> None:
    table = sinusoidal_table(8, 16).numpy()
    with pytest.raises(ValueError, match="offset must be between 1 and 7"):
        rotation_check(table, 8)
    with pytest.raises(ValueError, match="even d_model"):
        fit_offset_map(table[:, :15], 1)
