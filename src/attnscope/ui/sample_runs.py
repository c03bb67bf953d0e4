"""Averages over a sample of sentences, computed sentence by sentence inside the script run: an estimate
before they start, progress while they run, a Stop button, and every finished sentence kept.

Any click (Stop included) reruns the script, and Streamlit ends the running loop at its next progress
update; the finished sentences are already in session_state, so the page shows the result over them
("K of M sentences") and the button continues with the rest. Results are kept per sentence index (the
first n sentences of a split never change), so asking for more sentences reuses the finished ones.

Streamlit starts the new run at once, in a new thread, while the old one runs on to its next progress update
(runner.fastReruns): each run takes the sample run over first (`claim`), and a result the old thread finishes after
that is not stored, so one run's page never counts a sentence that its button still counts as left to do.
"""
from __future__ import annotations

import threading
import time
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Sequence

import streamlit as st

from attnscope.engine.decoding.translator import Translator
from attnscope.training.data import DataError, sample_pairs
from attnscope.ui import state
from attnscope.ui.text import plain

CHUNK = 32  # sentences decoded together (a batch); progress and stopping are per sentence

Work = Callable[[Sequence[str]], Generator[tuple[int, Any], None, None]]  # sentences -> (index among them, result)


@dataclass
class SampleRun:
    """One session's results of one sample computation (model, task, sample and settings: `key`)."""

    key: tuple[object, ...]
    chunk: int = CHUNK  # sentences `work` is given at once
    results: dict[int, Any] = field(default_factory=dict)  # sentence index -> its result (None: nothing to attribute)
    first_seconds: list[float] = field(default_factory=list)  # per chunk: until its first result (the chunk's setup too)
    next_seconds: list[float] = field(default_factory=list)  # each later result of a chunk: that sentence's own work
    started: bool = False  # the user asked for it (the sentences timed for the estimate alone are not shown)
    prior: float = 0.0  # seconds a sentence takes, measured elsewhere: the estimate until this run has its own times
    owner: object = None  # the script run that may store results (claim)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def claim(self) -> object:
        """Take the run over for the script run now starting; an older one still computing stores nothing more."""
        with self.lock:
            self.owner = token = object()
        return token

    def store(self, token: object, index: int, result: Any) -> bool:
        """Keep sentence `index`'s result if the script run `token` still owns the run; False: it was taken over."""
        with self.lock:
            if self.owner is not token:
                return False
            self.results[index] = result
            return True

    def finished(self, n: int | None = None) -> list[Any]:
        """Results of the first n sentences (None: of all) that are done, in sample order, untranslatable ones left out."""
        return [self.results[i] for i in sorted(self.results) if (n is None or i < n) and self.results[i] is not None]

    def todo(self, n: int) -> list[int]:
        """Indices of the first n sentences not computed yet."""
        return [i for i in range(n) if i not in self.results]

    def estimate(self, count: int) -> float:
        """Seconds for `count` more sentences, from the times measured so far: each sentence's own work, plus its
        share of its chunk's setup (what a chunk's first result took beyond that: decoding the whole batch, copying
        the model), shared as in the chunks measured. Setup grows with the batch, a little less than in proportion,
        so this errs long rather than short when the chunks to come are bigger than the first (2 sentences)."""
        if not self.first_seconds:
            return self.prior * count
        each = sum(self.next_seconds) / len(self.next_seconds) if self.next_seconds else 0.0
        setup = sum(max(first - each, 0.0) for first in self.first_seconds)
        return (each + setup / (len(self.next_seconds) + len(self.first_seconds))) * count


def sample_run(name: str, key: tuple[object, ...], chunk: int = CHUNK) -> SampleRun:
    """This session's run stored under `name`, started afresh when its key (model, sample, settings) changed."""
    run = state.stored(name)
    if not isinstance(run, SampleRun) or run.key != key:
        run = SampleRun(key, chunk)
        state.store(name, run)
    return run


def seconds(value: float) -> str:
    """A duration as people say it: "under 1 s", "about 4 s", "about 3 min" (never "about 0 s")."""
    if value < 1:
        return "under 1 s"
    return f"about {value:.0f} s" if value < 90 else f"about {value / 60:.0f} min"


def _compute(run: SampleRun, token: object, sentences: Sequence[str], indices: list[int], work: Work,
             tick: Callable[[], None] = lambda: None) -> bool:
    """Compute `indices` chunk by chunk, storing each sentence's result (and the time it took) as it finishes, while
    the script run `token` owns `run`; False when a newer run took it over (this one then stops at once)."""
    for start in range(0, len(indices), run.chunk):
        chunk = indices[start:start + run.chunk]
        clock, times = time.perf_counter(), run.first_seconds
        with closing(work([sentences[i] for i in chunk])) as results:  # closed at once when a click ends the loop
            for j, result in results:
                if not run.store(token, chunk[j], result):
                    return False
                now = time.perf_counter()
                times.append(now - clock)
                clock, times = now, run.next_seconds
                tick()  # a click since the last tick ends the loop here; everything finished is kept
        for i in chunk:
            if i not in run.results and not run.store(token, i, None):  # left out by `work`: blank, or nothing generated
                return False
    return True


def controls(run: SampleRun, sentences: Sequence[str], work: Work, label: str, key: str, timed: int = 2,
             prior: float | None = None) -> None:
    """The button that starts (or continues) the run, labelled with its estimate; once pressed, the loop with its
    progress bar and a Stop button. The estimate comes from `prior` (seconds a sentence takes, measured on the
    page's own sentence) when given; else the first `timed` sentences are computed beforehand, as one chunk, and
    kept: their times tell a sentence's own work from the chunk's setup (a whole batch where `work` batches)."""
    n, token = len(sentences), run.claim()
    if prior is not None:
        run.prior = prior
    elif n and not run.results:
        with st.spinner("Timing the first sentences to estimate the rest…"):
            _compute(run, token, sentences, list(range(min(timed, n))), work)
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
    if _compute(run, token, sentences, todo, work, tick):
        st.rerun()  # redraw the page (and this button's label) from the finished run


def sample_sentences(tr: Translator, split: str, n: int, pasted: str) -> list[str] | None:
    """A page's sample: the pasted lines when there are any, else the first `n` sentences of `split` of the embedded
    evaluation sample; None, said on the page, when that split is not there."""
    lines = [line for line in pasted.splitlines() if line.strip()]
    if lines:
        return lines[:n]
    try:
        return [s for s, _ in sample_pairs(tr.bundle.src_lang, tr.bundle.tgt_lang, split, n)]
    except DataError as err:
        st.warning(plain(err) + " Paste sentences instead, one per line.")
        return None
