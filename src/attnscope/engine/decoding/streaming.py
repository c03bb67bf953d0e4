"""A translation decoded token by token (`Translator.stream`): each step with its attention rows as it is decoded,
and Stop that keeps what was decoded.

The stream runs `greedy_steps`, the very loop `Translator.translate` runs, so a stream that finishes gives exactly
translate's result. The model's lock is held for each step only, never between two: a caller may draw, wait or
leave between steps without keeping other users of the model waiting. A stopped stream's result is a complete
record of the tokens decoded so far, marked `stopped`.

A stream may be driven from two threads at once: Streamlit starts a click's run in a new thread while the previous
run's thread finishes the step it is in (runner.fastReruns), and the new run goes on with the stream, or stops it.
So a step (and keeping it) and stopping happen under the stream's own lock, one at a time.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterator

import numpy as np

from attnscope.engine.decoding.decode import GreedyRun, greedy_steps
from attnscope.engine.recording.sharing import eval_mode, model_lock

if TYPE_CHECKING:
    from attnscope.checkpoints.decoding_rules import DecodingRules
    from attnscope.engine.decoding.translator import Translation, Translator


@dataclass(frozen=True)
class StreamStep:
    """One decoded token as it comes: what it is, how likely, and the rows its step attended with."""

    index: int  # the step (0 for the first output token)
    token: str  # the token's piece, as a record's output tokens spell it
    token_id: int
    prob: float
    self_attention: np.ndarray | None  # (layers, heads, index + 1): this step's query over the target so far
    cross_attention: np.ndarray | None  # (layers, heads, source length): over the source
    seconds: float  # since the stream started (the source's encoding included)


def stopped_note(decoded: int, budget: int) -> str:
    return (f"Decoding was stopped after {decoded} of at most {budget} tokens: everything shown is what the model "
            "decoded up to there.")


class TranslationStream:
    """A greedy translation, decoded as it is iterated (`for step in stream`); `stop()` ends it early, `result()` is
    the Translation as far as it went (after `stop()` if it has not finished). Made by `Translator.stream`."""

    def __init__(self, tr: Translator, src_ids: list[int], notes: tuple[str, ...], budget: int, rules: DecodingRules,
                 capture: bool = True) -> None:
        self.translator, self.source_ids, self.notes, self.budget = tr, src_ids, notes, budget
        self._steps = greedy_steps(tr.model, src_ids, max_len=budget, capture=capture, rules=rules)
        self._model, self._modules = tr.model, list(tr.model.modules())
        self._run = GreedyRun()
        self.seconds = 0.0  # spent decoding so far (the source's encoding included)
        self.encoding_seconds = 0.0  # of which the source's encoding
        self.steps: list[StreamStep] = []  # every step yielded so far, in order
        self.stopped = False
        self._lock = threading.Lock()  # one step or stop at a time (module docstring)

    @property
    def source_tokens(self) -> list[str]:
        return self.translator.bundle.src_codec.pieces(self.source_ids)

    @property
    def text(self) -> str:
        """The translation decoded so far, as text."""
        return self.translator.bundle.tgt_codec.decode(self._run.out.ids)

    @property
    def decoded(self) -> int:
        """Tokens decoded so far."""
        return len(self._run.out.ids)

    @property
    def per_token(self) -> float | None:
        """Seconds per output token so far (the source's encoding aside), None before the first."""
        return (self.seconds - self.encoding_seconds) / self.decoded if self.decoded else None

    @property
    def finished(self) -> bool:
        return self._run.finished

    def _next(self) -> bool:
        """Run one step (the encoder first), holding the model for it only; False when there is no more."""
        start = time.perf_counter()
        try:
            with model_lock(self._model), eval_mode(self._model, self._modules):  # Translator.inference, walked once
                self._run = next(self._steps)
        except StopIteration:
            return False
        finally:
            self.seconds += time.perf_counter() - start
            if not self._run.out.steps:
                self.encoding_seconds = self.seconds
        return True

    def __iter__(self) -> Iterator[StreamStep]:
        while True:
            with self._lock:  # the step is kept before another thread's step or stop
                if self.stopped or self._run.finished or not self._next():
                    return
                step = self._step() if self._run.out.steps else None
                if step is not None:
                    self.steps.append(step)
            if step is not None:
                yield step

    def _step(self) -> StreamStep:
        run, t = self._run, len(self._run.out.ids) - 1
        raw = run.out.steps[t]
        rows = [None if not run.selves else kind[t][:, :, -1].float().cpu().numpy() for kind in (run.selves, run.crosses)]
        piece = self.translator.bundle.tgt_codec.pieces([raw.token_id])[0]
        return StreamStep(t, piece, raw.token_id, float(np.exp(raw.log_prob)), rows[0], rows[1], self.seconds)

    def stop(self) -> None:
        """End the decode here (what was decoded is kept); nothing happens to a finished stream. A step running in
        another thread ends first."""
        with self._lock:
            if not self._run.finished:
                self.stopped = True
            self._steps.close()

    def result(self) -> Translation:
        """The translation of every token decoded: translate's result once finished; else, after `stop()`, a record
        of the tokens so far, marked `stopped`, with a note saying so."""
        if not self._run.finished:
            self.stop()
        notes = (*self.notes, stopped_note(self.decoded, self.budget)) if self.stopped else self.notes
        result = self.translator.assemble(self.source_ids, self._run.decoded(), notes, None, self.budget)
        return replace(result, stopped=self.stopped)
