"""A translation decoded token by token (`Translator.stream`): each step with its attention rows as it is decoded,
and Stop that keeps what was decoded. `DecodeStream` is what every stream shares; `TranslationStream` is greedy's
(beam search's: beam_streaming.py).

A greedy stream runs `greedy_steps`, the very loop `Translator.translate` runs, so a stream that finishes gives
exactly translate's result. The model's lock is held for each step only, never between two: a caller may draw, wait or
leave between steps without keeping other users of the model waiting. A stopped stream's result is a complete
record of the tokens decoded so far, marked `stopped`.

A stream may be driven from two threads at once: Streamlit starts a click's run in a new thread while the previous
run's thread finishes the step it is in (runner.fastReruns), and the new run goes on with the stream, or stops it.
So a step (and keeping it) and stopping happen under the stream's own lock, one at a time.
"""
from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Generic, Iterator, TypeVar

import numpy as np

from attnscope.engine.decoding.decode import GreedyRun, greedy_steps
from attnscope.engine.recording.sharing import eval_mode, model_lock

State = TypeVar("State")  # what a decode's generator yields after each step
Step = TypeVar("Step")  # what a stream yields after each step

if TYPE_CHECKING:
    from attnscope.checkpoints.decoding_rules import DecodingRules
    from attnscope.engine.decoding.beam_result import BeamResult
    from attnscope.engine.decoding.decode import Decoded
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


class DecodeStream(ABC, Generic[State, Step]):
    """A decode that runs as it is iterated (`for step in stream`), one generator step at a time: `stop()` ends it
    early, `result()` is the Translation as far as it went (after `stop()` if it has not finished). A subclass says
    how far its state has gone (`decoded`, `finished`), what each step yields (`_step`) and what was decoded
    (`_outcome`)."""

    def __init__(self, tr: Translator, src_ids: list[int], notes: tuple[str, ...], budget: int,
                 steps: Iterator[State]) -> None:
        self.translator, self.source_ids, self.notes, self.budget = tr, src_ids, notes, budget
        self._steps, self._state = steps, None
        self._model, self._modules = tr.model, list(tr.model.modules())
        self.seconds = 0.0  # spent decoding so far (the source's encoding included)
        self.encoding_seconds = 0.0  # of which the source's encoding
        self.steps: list[Step] = []  # every step yielded so far, in order
        self.stopped = False
        self._lock = threading.Lock()  # one step or stop at a time (module docstring)

    @property
    def source_tokens(self) -> list[str]:
        return self.translator.bundle.src_codec.pieces(self.source_ids)

    @property
    @abstractmethod
    def decoded(self) -> int:
        """Steps decoded so far."""

    @property
    @abstractmethod
    def finished(self) -> bool:
        """The decode has ended by itself."""

    @property
    def per_token(self) -> float | None:
        """Seconds per step so far (the source's encoding aside), None before the first."""
        return (self.seconds - self.encoding_seconds) / self.decoded if self.decoded else None

    def _next(self) -> bool:
        """Run one step (the encoder first), holding the model for it only; False when there is no more."""
        start = time.perf_counter()
        try:
            with model_lock(self._model), eval_mode(self._model, self._modules):  # Translator.inference, walked once
                self._state = next(self._steps)
        except StopIteration:
            return False
        finally:
            self.seconds += time.perf_counter() - start
            if not self.decoded:
                self.encoding_seconds = self.seconds
        return True

    def __iter__(self) -> Iterator[Step]:
        while True:
            with self._lock:  # the step is kept before another thread's step or stop
                if self.stopped or self.finished or not self._next():
                    return
                step = self._step() if self.decoded else None
                if step is not None:
                    self.steps.append(step)
            if step is not None:
                yield step

    @abstractmethod
    def _step(self) -> Step:
        """What the latest step yields."""

    def stop(self) -> None:
        """End the decode here (what was decoded is kept); nothing happens to a finished stream. A step running in
        another thread ends first."""
        with self._lock:
            if not self.finished:
                self.stopped = True
            self._steps.close()

    @abstractmethod
    def _outcome(self) -> tuple[Decoded, BeamResult | None, str]:
        """What was decoded (finished, or stopped), the search tree if any, and the note a stopped decode gets."""

    def result(self) -> Translation:
        """The translation decoded: translate's result once finished; else, after `stop()`, a record of what was
        decoded so far, marked `stopped`, with a note saying so."""
        if not self.finished:
            self.stop()
        decoded, beam, note = self._outcome()
        notes = (*self.notes, note) if self.stopped else self.notes
        result = self.translator.assemble(self.source_ids, decoded, notes, beam, self.budget)
        return replace(result, stopped=self.stopped)


class TranslationStream(DecodeStream[GreedyRun, StreamStep]):
    """A greedy translation, decoded as it is iterated (each step a StreamStep). Made by `Translator.stream`."""

    def __init__(self, tr: Translator, src_ids: list[int], notes: tuple[str, ...], budget: int, rules: DecodingRules,
                 capture: bool = True) -> None:
        super().__init__(tr, src_ids, notes, budget,
                         greedy_steps(tr.model, src_ids, max_len=budget, capture=capture, rules=rules))
        self._state = GreedyRun()

    @property
    def text(self) -> str:
        """The translation decoded so far, as text."""
        return self.translator.bundle.tgt_codec.decode(self._state.out.ids)

    @property
    def decoded(self) -> int:
        """Tokens decoded so far."""
        return len(self._state.out.ids)

    @property
    def finished(self) -> bool:
        return self._state.finished

    def live(self, rows: int) -> tuple[list[str], list[np.ndarray]]:
        """Every token so far and the cross-attention rows (last layer, mean of heads) of the latest `rows`."""
        latest = self.steps[-rows:]
        return [s.token for s in self.steps], [s.cross_attention[-1].mean(0) for s in latest
                                              if s.cross_attention is not None]

    def _step(self) -> StreamStep:
        run, t = self._state, len(self._state.out.ids) - 1
        raw = run.out.steps[t]
        rows = [None if not run.selves else kind[t][:, :, -1].float().cpu().numpy() for kind in (run.selves, run.crosses)]
        piece = self.translator.bundle.tgt_codec.pieces([raw.token_id])[0]
        return StreamStep(t, piece, raw.token_id, float(np.exp(raw.log_prob)), rows[0], rows[1], self.seconds)

    def _outcome(self) -> tuple[Decoded, None, str]:
        return self._state.decoded(), None, stopped_note(self.decoded, self.budget)
