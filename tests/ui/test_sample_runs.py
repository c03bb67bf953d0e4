"""The sample runner keeps every finished sentence when a click ends its loop, and frees what the work held."""
from __future__ import annotations

import pytest

from attnscope.ui.sample_runs import SampleRun, _compute, seconds


class Click(Exception):
    """Stands for the rerun Streamlit raises at a progress update after a click."""


def test_a_stopped_run_keeps_what_finished_closes_the_work_and_continues_with_the_rest() -> None:
    sentences = [f"s{i}" for i in range(10)]
    closed, seen = [], []

    def work(chunk):
        try:
            for j, text in enumerate(chunk):
                seen.append(text)
                if text != "s4":  # nothing to attribute in s4: left out, like a blank sentence
                    yield j, text.upper()
        finally:
            closed.append(chunk[0])

    def click_after_five() -> None:
        if len(run.results) == 5:
            raise Click

    run = SampleRun(("model", "split"))
    with pytest.raises(Click):
        _compute(run, sentences, run.todo(10), work, 3, click_after_five)
    assert sorted(run.results) == [0, 1, 2, 3, 5]  # s4 is marked done only when its chunk ends
    assert closed == ["s0", "s3"]  # the stopped chunk's work was closed at once, not at garbage collection
    assert run.finished(10) == ["S0", "S1", "S2", "S3", "S5"] and run.finished(3) == ["S0", "S1", "S2"]
    assert run.todo(10) == [4, 6, 7, 8, 9] and run.todo(4) == []
    _compute(run, sentences, run.todo(10), work, 3)
    assert seen == sentences[:6] + ["s4"] + sentences[6:]  # only the unfinished ones again
    assert run.results[4] is None and run.todo(10) == []
    assert run.finished() == [s.upper() for s in sentences if s != "s4"]


def test_the_estimate_is_the_measured_rate_times_what_is_left() -> None:
    run = SampleRun(("k",), {0: 1, 1: None}, seconds=3.0)
    assert run.estimate(10) == 15.0
    assert SampleRun(("k",)).estimate(10) == 0.0
    assert seconds(4.4) == "about 4 s" and seconds(200) == "about 3 min"
