"""The path integral of integrated gradients, to a completeness the user chooses.

Integrated gradients attribute ∫_0^1 g(α) dα, where g(α) [T, N] is gradient × input at the path
point α, and completeness says each row sums to f(1) − f(0) (f [T] is the explained value). That
gives every sub-interval [a, b] an exact check: its share of the integral must sum to f(b) − f(a),
and f costs one forward pass. So the rule is composite Gauss-Legendre (the nodes and weights of
numpy.polynomial.legendre.leggauss on each panel; captum offers the same rule on one panel) that
splits, in each round, the panels whose check fails worst, until every row's total gap is within
the tolerance or the budget of gradient evaluations is spent. On the shipped models f moves by
~10 nats inside a narrow band of α, which a fixed grid of 32 midpoints misses by 12% at the median.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

CHUNK = 16  # gradient evaluations per round: what one batched pass computes

Gradients = Callable[[np.ndarray], np.ndarray]  # alphas [A] -> gradient × input [A, T, N]
Values = Callable[[np.ndarray], np.ndarray]  # alphas [A] -> f [A, T]


@dataclass(frozen=True)
class IGSettings:
    """How completely integrated gradients integrate, and at what cost at most."""

    tolerance: float = 0.05  # each token's gap, as a fraction of its |f(x) - f(baseline)| ...
    floor: float = 1.0  # ... or of this many nats when the change is smaller (0.05 nats by default)
    max_points: int = 256  # gradient evaluations at most (time grows with them, about linearly)
    nodes: int = 2  # Gauss-Legendre nodes per panel
    panels: int = 8  # panels of the first round

    def __post_init__(self) -> None:
        if not (self.tolerance > 0 and self.floor > 0):
            raise ValueError(f"the completeness tolerance and floor must be positive, got {self.tolerance} and {self.floor}")
        if self.nodes < 1 or self.panels < 1:
            raise ValueError(f"need at least one panel of one node, got {self.panels} panels of {self.nodes}")
        if self.max_points < self.nodes * self.panels:
            raise ValueError(f"a budget of {self.max_points} gradient evaluations cannot cover the first "
                             f"{self.panels} panels of {self.nodes} nodes; allow at least {self.nodes * self.panels}")

    def allowed(self, change: np.ndarray) -> np.ndarray:
        """[T] the largest gap accepted for rows whose value changes by `change` along the path."""
        return self.tolerance * np.maximum(np.abs(change), self.floor)


@dataclass(frozen=True)
class PathIntegral:
    """∫_0^1 g(α) dα by the adaptive rule, with the values it is checked against."""

    integral: np.ndarray  # [T, N]
    start: np.ndarray  # [T] f(0)
    end: np.ndarray  # [T] f(1)
    points: int  # gradient evaluations spent
    panels: int


class _Path:
    """g and f at the path points asked for so far, each computed once."""

    def __init__(self, gradients: Gradients, values: Values) -> None:
        self._gradients, self._values = gradients, values
        self.g: dict[float, np.ndarray] = {}
        self.f: dict[float, np.ndarray] = {}

    def need(self, alphas: list[float], gradient: bool) -> None:
        known = self.g if gradient else self.f
        new = sorted({a for a in alphas if a not in known})
        if new:
            computed = (self._gradients if gradient else self._values)(np.asarray(new))
            known.update(zip(new, computed))


def integrate(gradients: Gradients, values: Values, settings: IGSettings = IGSettings()) -> PathIntegral:
    """Integrate g over [0, 1], splitting panels until every row's sum is within `settings.allowed` of f(1) − f(0)."""
    xi, wi = np.polynomial.legendre.leggauss(settings.nodes)

    def nodes(panel: tuple[float, float]) -> list[tuple[float, float]]:
        a, b = panel  # (alpha, weight) of each node mapped onto [a, b]
        return [(float((b - a) / 2 * x + (a + b) / 2), float((b - a) / 2 * w)) for x, w in zip(xi, wi)]

    path = _Path(gradients, values)
    panels = [(k / settings.panels, (k + 1) / settings.panels) for k in range(settings.panels)]
    path.need([0.0, 1.0], gradient=False)  # the panels' inner ends only when a round falls short: most do not
    path.need([a for p in panels for a, _ in nodes(p)], gradient=True)
    per_split = 2 * settings.nodes
    while True:
        parts = {p: sum(w * path.g[a] for a, w in nodes(p)) for p in panels}  # each [T, N]
        total = sum(parts.values())
        change = path.f[1.0] - path.f[0.0]
        allowed = settings.allowed(change)
        open_rows = np.abs(total.sum(-1) - change) > allowed
        room = (settings.max_points - len(path.g)) // per_split
        if not open_rows.any() or room < 1:
            return PathIntegral(total, path.f[0.0], path.f[1.0], len(path.g), len(panels))
        path.need([e for p in panels for e in p], gradient=False)
        miss = {p: (np.abs(parts[p].sum(-1) - (path.f[p[1]] - path.f[p[0]])) / allowed)[open_rows].max() for p in panels}
        worst = sorted(panels, key=lambda p: -miss[p])[: min(room, max(1, CHUNK // per_split))]
        halves = [h for a, b in worst for h in ((a, (a + b) / 2), ((a + b) / 2, b))]
        panels = [p for p in panels if p not in worst] + halves
        path.need([a for p in halves for a, _ in nodes(p)], gradient=True)
