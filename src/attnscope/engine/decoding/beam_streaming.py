"""A beam search shown as it searches (`Translator.stream(..., beam_size=k)`): after each step, the best hypothesis
so far with its attention rows, and Stop that keeps what was searched.

The stream runs `beam_decode_steps`, the very search `Translator.translate` runs for a beam, so a stream that
finishes gives exactly translate's result (hypotheses, tree and record). "The best so far" is by the search's own
score, log-probability ÷ the length penalty of the hypothesis' length: among the finished hypotheses and, while the
search goes on, those still in the beam. A stopped stream's result is that hypothesis as a complete record of its
tokens, marked `stopped`, and its tree with the beam at the stop kept as "stopped" hypotheses. Locking between
steps and threads is DecodeStream's (streaming.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attnscope.engine.decoding.beam_record import RecordedBeam, beam_decode_steps
from attnscope.engine.decoding.decode import Decoded
from attnscope.engine.decoding.streaming import DecodeStream

if TYPE_CHECKING:
    from attnscope.checkpoints.decoding_rules import DecodingRules
    from attnscope.engine.decoding.beam_result import BeamResult
    from attnscope.engine.decoding.translator import Translator


@dataclass(frozen=True)
class BeamStreamStep:
    """The search after one step: the best hypothesis so far, its score and whether it has finished."""

    index: int  # the step (0 for the first output token)
    token_ids: tuple[int, ...]  # the best hypothesis' tokens (ending in </s> when it finished with one)
    score: float  # log-probability ÷ the length penalty of its length
    finished: bool  # the best hypothesis has finished (else it is still in the beam)
    seconds: float  # since the stream started (the source's encoding included)


def stopped_beam_note(steps: int, budget: int, beam_size: int) -> str:
    return (f"Beam search (beam of {beam_size}) was stopped after {steps} of at most {budget} steps: the translation "
            "shown is its best hypothesis at that point by the search's own score (log-probability ÷ length "
            "penalty), finished or still in the beam, with the attention the search computed for it.")


class BeamStream(DecodeStream[RecordedBeam, BeamStreamStep]):
    """A beam search for one sentence, run as it is iterated (each step a BeamStreamStep). Made by
    `Translator.stream` with a beam size above 1."""

    def __init__(self, tr: Translator, src_ids: list[int], notes: tuple[str, ...], budget: int, rules: DecodingRules,
                 beam_size: int) -> None:
        super().__init__(tr, src_ids, notes, budget,
                         beam_decode_steps(tr.model, src_ids, beam_size, max_len=budget, rules=rules))
        self.beam_size = beam_size
        self._best: int | None = None  # the tree node of the best hypothesis so far
        self._settled: tuple[Decoded, BeamResult] | None = None

    @property
    def decoded(self) -> int:
        """Steps the search has run."""
        return 0 if self._state is None else self._state.run.step

    @property
    def finished(self) -> bool:
        return self._state is not None and self._state.run.finished

    @property
    def best_ids(self) -> list[int]:
        """The tokens of the best hypothesis so far."""
        best = self._best  # read once: another thread's step may move it
        return [] if best is None else self._state.tree.path(best)

    @property
    def text(self) -> str:
        """The best hypothesis so far, as text."""
        return self.translator.bundle.tgt_codec.decode(self.best_ids)

    def live(self, rows: int) -> tuple[list[str], list[np.ndarray]]:
        """The best hypothesis' tokens and the cross-attention rows (last layer, mean of heads) of its latest `rows`
        (a node's path and rows never change once it is in the tree, whatever steps come after)."""
        best = self._best
        if best is None:
            return [], []
        return (self.translator.bundle.tgt_codec.pieces(self._state.tree.path(best)),
                self._state.cross_rows(best, rows))

    def _step(self) -> BeamStreamStep:
        best = self._state.best()
        node = self._state.tree.nodes[best]
        score = node.score if node.status == "finished" else node.log_prob / self._state.run.rules.divisor(node.step)
        self._best = best
        return BeamStreamStep(self.decoded - 1, tuple(self.best_ids), score, node.status == "finished", self.seconds)

    def _outcome(self) -> tuple[Decoded, BeamResult | None, str]:
        with self._lock:  # settling marks the tree: once
            if self._settled is None:
                beam, decoded = self._state.settle(self.stopped) if self._state is not None else (None, Decoded([]))
                self._settled = decoded, beam
        return (*self._settled, stopped_beam_note(self.decoded, self.budget, self.beam_size))
