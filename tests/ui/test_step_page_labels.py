"""Pure helpers of the step-through page."""
from __future__ import annotations

from attnscope.engine.decoding.beam_result import BeamNode, BeamResult
from attnscope.ui.step_page import hypothesis_labels


def test_an_empty_beam_hypothesis_is_named_not_blank() -> None:
    beam = BeamResult([([5, 2], -0.2, -0.4), ([2], -8.336, -8.336)])
    labels = hypothesis_labels(beam, lambda ids: "" if ids == [2] else "ein Hund")
    assert labels == ["1. ein Hund  (score -0.200: log-probability -0.40 ÷ 2 tokens)",
                      "2. (empty output: the model ended at once)  (score -8.336: log-probability -8.34 ÷ 1 token)"]


def test_a_stopped_search_s_hypotheses_in_the_beam_are_said_unfinished() -> None:
    nodes = [BeamNode(0, None, 0, 1, 0.0, "extended"), BeamNode(1, 0, 1, 5, -0.1, "stopped", -0.1),
             BeamNode(2, 0, 1, 2, -0.9, "finished", -0.9)]
    beam = BeamResult([([5], -0.1, -0.1), ([2], -0.9, -0.9)], nodes)
    labels = hypothesis_labels(beam, lambda ids: "ein" if ids == [5] else "")
    assert labels[0] == "1. ein  (unfinished, in the beam when stopped; score -0.100: log-probability -0.10 ÷ 1 token)"
    assert "unfinished" not in labels[1]
