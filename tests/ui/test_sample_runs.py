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

    run = SampleRun(("model", "split"), chunk=3)
    with pytest.raises(Click):
        _compute(run, run.claim(), sentences, run.todo(10), work, click_after_five)
    assert sorted(run.results) == [0, 1, 2, 3, 5]  # s4 is marked done only when its chunk ends
    assert closed == ["s0", "s3"]  # the stopped chunk's work was closed at once, not at garbage collection
    assert run.finished(10) == ["S0", "S1", "S2", "S3", "S5"] and run.finished(3) == ["S0", "S1", "S2"]
    assert run.todo(10) == [4, 6, 7, 8, 9] and run.todo(4) == []
    assert _compute(run, run.claim(), sentences, run.todo(10), work)
    assert seen == sentences[:6] + ["s4"] + sentences[6:]  # only the unfinished ones again
    assert run.results[4] is None and run.todo(10) == []
    assert run.finished() == [s.upper() for s in sentences if s != "s4"]


def test_a_run_taken_over_by_a_newer_script_run_stores_nothing_more() -> None:
    """Streamlit starts the run after a click in a new thread while the old one runs on to its next progress update:
    what the old one finishes after the new run claimed the sample is not stored, so the new page's counts agree."""
    run = SampleRun(("model", "split"), chunk=4)
    old = run.claim()

    def work(chunk):
        for j, text in enumerate(chunk):
            if j == 2:
                run.claim()  # the click's run starts here, reading the results
            yield j, text.upper()

    assert not _compute(run, old, [f"s{i}" for i in range(8)], run.todo(8), work)
    assert sorted(run.results) == [0, 1] and run.todo(8) == [2, 3, 4, 5, 6, 7]


def test_the_estimate_counts_each_sentence_s_work_and_its_share_of_its_chunk_s_setup() -> None:
    """A chunk's first result also waited for the chunk's setup (decoding the batch): 3 s here for 3 sentences, 1 s
    a sentence of their own."""
    run = SampleRun(("k",), chunk=4, first_seconds=[4.0], next_seconds=[1.0, 1.0])
    assert run.estimate(10) == 10 * (1.0 + 3.0 / 3)
    assert SampleRun(("k",), first_seconds=[2.0]).estimate(5) == 10.0  # one sentence timed: all of it counts
    assert SampleRun(("k",)).estimate(10) == 0.0
    assert SampleRun(("k",), prior=0.5).estimate(10) == 5.0  # measured elsewhere: until the run has its own times
    assert SampleRun(("k",), prior=0.5, first_seconds=[2.0]).estimate(5) == 10.0
    assert seconds(4.4) == "about 4 s" and seconds(200) == "about 3 min"
    assert seconds(0.3) == seconds(0.0) == "under 1 s"  # never "about 0 s"


def test_the_times_of_a_run_are_split_into_chunk_setups_and_sentences() -> None:
    run = SampleRun(("k",), chunk=4)
    _compute(run, run.claim(), [f"s{i}" for i in range(6)], list(range(6)), lambda chunk: ((j, t) for j, t in enumerate(chunk)))
    assert len(run.first_seconds) == 2 and len(run.next_seconds) == 4  # chunks of 4 and 2
