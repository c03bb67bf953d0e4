"""The atlas's joint map of one head: a head whose queries and keys lie on a known plane is recovered up to a
rotation or reflection, and the normalisation leaves every weight as the head computed it."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.engine.analysis.projection import normalise, project


def plane_head(seed: int, n: int = 40, dh: int = 8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Queries and keys on a known plane of R^dh (offset off the plane), keys the queries' mirror image: both
    clouds share a centre and a mean norm, so the normalisation has nothing to change. Returns (q, k, plane coords)."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(dh, dh)))
    plane, normal = basis[:, :2], basis[:, 2]
    coords = rng.normal(size=(n, 2)) * [3.0, 1.0]
    coords -= coords.mean(0)
    both = np.concatenate([coords, -coords])
    points = both @ plane.T + 5.0 * normal
    return points[:n], points[n:], both


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_head_on_a_known_plane_is_recovered_up_to_rotation_or_reflection(seed: int) -> None:
    q, k, truth = plane_head(seed)
    p = project(q, k)
    got = np.concatenate([p.queries, p.keys]).astype(np.float64)
    rotation, *_ = np.linalg.lstsq(truth, got, rcond=None)  # got = truth @ R
    np.testing.assert_allclose(rotation.T @ rotation, np.eye(2), atol=1e-5)  # orthogonal: distances kept
    np.testing.assert_allclose(truth @ rotation, got, atol=1e-5)
    assert p.explained == pytest.approx(1.0, abs=1e-9)
    assert p.scale == pytest.approx(1.0) and np.allclose(p.shift, 0.0)


def softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_normalising_keeps_each_querys_weights() -> None:
    """Keys shifted and both clouds scaled: each query's scores change by one constant, so its softmax does not."""
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(12, 6)) * 4.0 + 2.0, rng.normal(size=(9, 6)) * 0.5 - 1.0
    q2, k2, shift, scale = normalise(q, k)
    change = q2 @ k2.T - q @ k.T
    np.testing.assert_allclose(change, change[:, :1].repeat(k.shape[0], 1), atol=1e-9)
    np.testing.assert_allclose(softmax(q2 @ k2.T), softmax(q @ k.T), atol=1e-12)
    np.testing.assert_allclose(q2.mean(0), k2.mean(0), atol=1e-9)  # one centre
    np.testing.assert_allclose(np.linalg.norm(q2, axis=1).mean(), np.linalg.norm(k2, axis=1).mean(), rtol=1e-9)
    assert scale != pytest.approx(1.0) and not np.allclose(shift, 0.0)


def test_the_sign_of_each_axis_is_fixed() -> None:
    q, k, _ = plane_head(4)
    a, b = project(q, k), project(q[::-1].copy(), k[::-1].copy())
    np.testing.assert_allclose(a.queries, b.queries[::-1], atol=1e-5)


def test_an_empty_head_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one query and one key"):
        project(np.zeros((0, 4)), np.zeros((3, 4)))
