"""Pure helpers of the step-through page."""
from __future__ import annotations

from attnscope.engine.decoding.beam_result import BeamResult
from attnscope.ui.step_page import hypothesis_labels


def test_an_empty_beam_hypothesis_is_named_not_blank() -> None:
    beam = BeamResult([([5, 2], -0.2, -0.4), ([2], -8.336, -8.336)])
    labels = hypothesis_labels(beam, lambda ids: "" if ids == [2] else "ein Hund")
    assert labels == ["1. ein Hund  (score -0.200: log-probability -0.40 ÷ 2 tokens)",
                      "2. (empty output: the model ended at once)  (score -8.336: log-probability -8.34 ÷ 1 token)"]
