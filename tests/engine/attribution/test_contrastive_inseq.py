"""Contrastive attributions against Inseq's (an independent implementation on transformers and captum): the same
numbers, within float32 noise, on an imported Hugging Face Marian model, 20 sentences. The fixtures are Inseq's own
output (tests/fixtures/contrastive/regenerate.py, run once in Inseq's virtual environment)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attnscope import import_model
from attnscope.engine.attribution.contrastive import Contrast, contrastive_saliency
from attnscope.engine.attribution.quadrature import IGSettings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "contrastive"
RELATIVE = 1e-5  # the target: same numbers within float32 noise


@pytest.fixture(scope="module")
def inseq() -> dict:
    return json.loads((FIXTURES / "inseq.json").read_text())


@pytest.fixture(scope="module")
def model():
    return import_model(str(FIXTURES / "marian")).model


def worst(ours, theirs: dict) -> float:
    """The largest difference over every attribution of the step, relative to the largest attribution."""
    got = np.concatenate([ours.source[0], ours.prefix[0]])
    want = np.concatenate([theirs["source"], theirs["prefix"]])
    assert got.shape == want.shape
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("method", ["input_x_gradient", "integrated_gradients"])
def test_contrastive_attributions_equal_inseq_s(inseq: dict, model, method: str) -> None:
    steps = inseq["ig_steps"]  # captum's Gauss-Legendre rule on one panel is our quadrature's first round
    ig = IGSettings(nodes=steps, panels=1, max_points=steps) if method == "integrated_gradients" else None
    assert len(inseq["rows"]) == 20
    for row in inseq["rows"]:
        ours = contrastive_saliency(model, row["source_ids"], row["target_ids"], Contrast(row["step"], row["foil"]), ig)
        theirs = row[method]
        assert ours.score[0] == pytest.approx(theirs["score"], rel=RELATIVE, abs=1e-6), row["sentence"]
        assert worst(ours, theirs) <= RELATIVE, row["sentence"]
