"""The adaptive Gauss-Legendre rule on integrands whose integrals are known in closed form."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.engine.attribution.quadrature import IGSettings, integrate

CENTRES = np.array([0.23, 0.5, 0.91])  # where each row's value jumps
STEEPNESS = np.array([300.0, 40.0, 150.0])
SHARES = np.array([[0.7, 0.3], [0.5, 0.5], [-0.2, 1.2]])  # how each row's derivative splits over two inputs


def values(alphas: np.ndarray) -> np.ndarray:
    """f_t(α) = 8 tanh(k_t (α − c_t)): ~16 nats gained in a band of width ~1/k_t, like the shipped models' paths."""
    return 8 * np.tanh(STEEPNESS * (alphas[:, None] - CENTRES))  # [A, T]


class Counted:
    """g(α) [A, T, 2] with f' split over the inputs by SHARES; counts every point it is asked for."""

    def __init__(self) -> None:
        self.points: list[float] = []

    def __call__(self, alphas: np.ndarray) -> np.ndarray:
        self.points += list(alphas)
        slope = 8 * STEEPNESS / np.cosh(STEEPNESS * (alphas[:, None] - CENTRES)) ** 2  # [A, T]
        return slope[:, :, None] * SHARES


def exact() -> np.ndarray:
    change = values(np.array([1.0]))[0] - values(np.array([0.0]))[0]
    return change[:, None] * SHARES


def test_every_row_ends_within_its_tolerance_and_near_the_exact_integral() -> None:
    g = Counted()
    settings = IGSettings(tolerance=0.01, max_points=1024)
    got = integrate(g, values, settings)
    change = got.end - got.start
    assert np.all(np.abs(got.integral.sum(-1) - change) <= settings.allowed(change))
    np.testing.assert_allclose(got.integral, exact(), atol=0.02 * np.abs(exact()).max())
    assert got.points == len(g.points) == len(set(g.points)) <= settings.max_points  # each point once
    assert got.points > settings.panels * settings.nodes  # the steep rows needed refining


def test_a_fixed_grid_of_the_same_cost_misses_what_the_adaptive_rule_meets() -> None:
    got = integrate(Counted(), values, IGSettings(tolerance=0.01, max_points=1024))
    midpoints = (np.arange(got.points) + 0.5) / got.points
    fixed = Counted()(midpoints).mean(0)
    assert np.abs(fixed.sum(-1) - exact().sum(-1)).max() > np.abs(got.integral.sum(-1) - exact().sum(-1)).max()


def test_the_budget_bounds_the_work_and_the_result_says_what_it_reached() -> None:
    g = Counted()
    got = integrate(g, values, IGSettings(tolerance=1e-6, max_points=40))
    assert got.points <= 40 and len(g.points) == got.points
    assert np.abs(got.integral.sum(-1) - (got.end - got.start)).max() > 1e-6  # not reached, and visibly so


def test_gauss_legendre_is_exact_for_polynomials_of_degree_2n_minus_1() -> None:
    coefficients = np.array([0.3, -1.0, 2.0, 0.5, -0.7, 1.1])  # degree 5: exact with 3 nodes on one panel

    def poly_values(a: np.ndarray) -> np.ndarray:
        return np.polynomial.polynomial.polyval(a, np.polynomial.polynomial.polyint(coefficients))[:, None]

    def poly_gradients(a: np.ndarray) -> np.ndarray:
        return np.polynomial.polynomial.polyval(a, coefficients)[:, None, None]

    got = integrate(poly_gradients, poly_values, IGSettings(tolerance=1e-9, nodes=3, panels=1, max_points=3))
    want = poly_values(np.array([1.0]))[0, 0] - poly_values(np.array([0.0]))[0, 0]
    assert got.points == 3 and got.integral[0, 0] == pytest.approx(want, abs=1e-14)


def test_the_panels_inner_ends_are_evaluated_only_when_a_round_falls_short() -> None:
    asked: list[float] = []

    def counted_values(a: np.ndarray) -> np.ndarray:
        asked.extend(a)
        return values(a)

    gentle = integrate(lambda a: np.ones((len(a), 1, 1)), lambda a: (asked.extend(a), a[:, None])[1], IGSettings())
    assert gentle.points == 16 and sorted(asked) == [0.0, 1.0]  # complete at once: f at the path's ends only
    asked.clear()
    steep = integrate(Counted(), counted_values, IGSettings(tolerance=0.01, max_points=1024))
    assert steep.points > 16 and 0.5 in asked and len(asked) == len(set(asked))  # refined: inner ends too, once each


@pytest.mark.parametrize("kw,match", [(dict(tolerance=0), "positive"), (dict(nodes=0), "at least one panel"),
                                      (dict(max_points=8, panels=8, nodes=2), "allow at least 16")])
def test_bad_settings_say_what_to_do(kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        IGSettings(**kw)
