"""Averages over a sample of sentences, computed sentence by sentence inside the script run: an estimate
before they start, progress while they run, a Stop button, and every finished sentence kept.

Any click (Stop included) reruns the script, and Streamlit ends the running loop at its next progress
update; the finished sentences are already in session_state, so the page shows the result over them
("K of M sentences") and the button continues with the rest. Results are kept per sentence index (the
first n sentences of a split never change), so asking for more sentences reuses the finished ones.
"""
from __future__ import annotations

import time
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Sequence

import streamlit as st

CHUNK = 8  # sentences decoded together; progress and stopping are per sentence

Work = Callable[[Sequence[str]], Generator[tuple[int, Any], None, None]]  # sentences -> (index among them, result)


@dataclass
class SampleRun:
    """One session's results of one sample computation (model, task, sample and settings: `key`)."""

    key: tuple[object, ...]
    results: dict[int, Any] = field(default_factory=dict)  # sentence index -> its result (None: nothing to attribute)
    seconds: float = 0.0  # spent computing them
    started: bool = False  # the user asked for it (the sentence timed for the estimate alone is not shown)

    def finished(self, n: int | None = None) -> list[Any]:
        """Results of the first n sentences (None: of all) that are done, in sample order, untranslatable ones left out."""
        return [self.results[i] for i in sorted(self.results) if (n is None or i < n) and self.results[i] is not None]

    def todo(self, n: int) -> list[int]:
        """Indices of the first n sentences not computed yet."""
        return [i for i in range(n) if i not in self.results]

    def estimate(self, count: int) -> float:
        """Seconds for `count` more sentences at the rate measured so far."""
        return self.seconds / max(len(self.results), 1) * count


def sample_run(name: str, key: tuple[object, ...]) -> SampleRun:
    """This session's run stored under `name`, started afresh when its key (model, sample, settings) changed."""
    run = st.session_state.get(name)
    if not isinstance(run, SampleRun) or run.key != key:
        run = st.session_state[name] = SampleRun(key)
    return run


def seconds(value: float) -> str:
    """A duration as people say it: "about 4 s", "about 3 min"."""
    return f"about {value:.0f} s" if value < 90 else f"about {value / 60:.0f} min"


def _compute(run: SampleRun, sentences: Sequence[str], indices: list[int], work: Work, chunk_size: int,
             tick: Callable[[], None] = lambda: None) -> None:
    """Compute `indices` chunk by chunk, storing each sentence's result (and the time it took) as it finishes."""
    for start in range(0, len(indices), chunk_size):
        chunk = indices[start:start + chunk_size]
        clock = time.perf_counter()
        with closing(work([sentences[i] for i in chunk])) as results:  # closed at once when a click ends the loop
            for j, result in results:
                run.results[chunk[j]] = result
                now = time.perf_counter()
                run.seconds, clock = run.seconds + now - clock, now
                tick()  # a click since the last tick ends the loop here; everything finished is kept
        for i in chunk:
            run.results.setdefault(i, None)  # left out by `work`: blank, or nothing generated


def controls(run: SampleRun, sentences: Sequence[str], work: Work, label: str, key: str, chunk: int = CHUNK,
             timed: int = 1) -> None:
    """The button that starts (or continues) the run, labelled with its estimate; once pressed, the loop with its
    progress bar and a Stop button. The first `timed` sentences are computed beforehand (and kept) to time the
    estimate: one where each sentence is computed alone, a whole batch where `work` batches `chunk` of them."""
    n = len(sentences)
    if n and not run.results:
        with st.spinner("Timing the first sentences to estimate the rest…"):
            _compute(run, sentences, list(range(min(timed, n))), work, chunk)
    todo = run.todo(n)
    if run.started and not todo:
        return
    when = seconds(run.estimate(len(todo)))
    text = f"Continue: {len(todo)} more sentences ({when})" if run.started else f"{label} ({when} for {n} sentences)"
    if not st.button(text, key=key):
        return
    run.started = True
    bar = st.progress(0.0)
    st.button("Stop", key=f"{key}_stop", help="Stops after the sentence being computed; the finished ones are kept.")

    def tick() -> None:
        done = n - len(run.todo(n))
        bar.progress(done / n, text=f"{done} of {n} sentences, {seconds(run.estimate(n - done))} left. Stop (or any "
                                    "click on the page) keeps the finished ones.")

    tick()
    _compute(run, sentences, todo, work, chunk, tick)
    st.rerun()  # redraw the page (and this button's label) from the finished run
