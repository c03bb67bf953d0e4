"""How one attention module's calls during a decoding loop become the rows of one sentence.

Loops as people write them call a module in one of three ways, recognised from the weights alone:
- once (or several times identically, like an encoder re-run at every step: repeats collapse to one);
- `rerun`: the whole prefix again at every step (one more query per call, the earlier rows unchanged);
- `steps`: one new query per call (a KV cache), after a first call that may hold a whole prompt.
A beam search runs several rows per call and reorders them between steps. A sentence's row t is
taken from the call that chose its token t+1 (the last query of that call, at the hypothesis' row
then). Reruns reveal the rows' ancestry (each row's earlier rows equal its parent's), so naming the
hypothesis' row in the last call is enough; cached steps do not, so a reordered beam needs its row
at every step (`beam_rows`, like Hugging Face's `beam_indices`) or is refused in one sentence.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import torch
from torch import Tensor

from attnscope.engine.recording.steps import join_steps
from attnscope.records.attention import RecordError

Pattern = Literal["once", "rerun", "steps"]
SAME = 1e-5  # two float32 computations of the same rows (a batch vs one row, a longer prefix) agree this well


@dataclass(frozen=True)
class ModuleCalls:
    """The distinct calls of one module (each [B, H, Q, K]) and how they make up a loop."""

    name: str
    calls: tuple[Tensor, ...]
    pattern: Pattern
    reordered: bool = False  # its keys' batch rows were picked by index between steps (a beam reordering its cache)

    def rows(self, item: int = 0, beam_rows: Sequence[int] | None = None) -> Tensor:
        """[H, Q, K] of one sentence or hypothesis: batch row `item` (of the last call, for a rerun
        beam), or the given row at every step; keys padded with zeros to the last call's count."""
        if self.pattern == "once":
            return self.calls[0][self._row(0, item)]
        path = self._path(item, beam_rows)
        tail = [call[r, :, -1:] for call, r in zip(self.calls[1:], path[1:])]  # the query each step added
        return join_steps([self.calls[0][path[0]], *tail])

    def all_rows(self) -> Tensor:
        """[B, H, Q, K]: every batch row's sentence (B of the last call)."""
        if self.pattern == "once":
            return self.calls[0]
        if self.pattern == "steps" and self._ambiguous():
            raise self._beam_error()
        return torch.stack([self.rows(b) for b in range(self.calls[-1].shape[0])])

    def _row(self, t: int, row: int) -> int:
        """Row `row` of call t; a call on one row serves every row (an encoder run once for a beam)."""
        batch = self.calls[t].shape[0]
        if row < batch:
            return row
        if batch == 1:
            return 0
        raise RecordError(f"{self.name} ran on a batch of {batch} rows; asked for row {row} "
                          f"(rows 0..{batch - 1})")

    def _path(self, item: int, beam_rows: Sequence[int] | None) -> list[int]:
        """The hypothesis' row in every call."""
        if beam_rows is not None:
            if len(beam_rows) != len(self.calls):
                raise RecordError(f"beam_rows gives {len(beam_rows)} rows but {self.name} ran {len(self.calls)} "
                                  "decoding steps: give the hypothesis' batch row at each step")
            path = [self._row(t, int(r)) for t, r in enumerate(beam_rows)]
            if self.pattern == "rerun":
                for t in range(1, len(path)):
                    if not extends(self.calls[t][path[t]], self.calls[t - 1][path[t - 1]]):
                        raise RecordError(f"beam_rows do not follow one hypothesis: in {self.name}, row {path[t]} of "
                                          f"step {t} does not continue row {path[t - 1]} of step {t - 1}")
            return path
        if self.pattern == "steps":
            if self._ambiguous():
                raise self._beam_error()
            return [self._row(t, item) for t in range(len(self.calls))]
        path = [self._row(len(self.calls) - 1, item)]
        for t in range(len(self.calls) - 1, 0, -1):
            path.insert(0, parent(self.calls[t][path[0]], self.calls[t - 1], path[0]))
        return path

    def _ambiguous(self) -> bool:
        """Whether a row's index does not follow one sentence across cached steps (batch sizes change, rows moved)."""
        sizes = {c.shape[0] for c in self.calls}
        return len(sizes) > 1 or (self.reordered and max(sizes) > 1)

    def _beam_error(self) -> RecordError:
        sizes = ", ".join(str(c.shape[0]) for c in self.calls[:6]) + (", ..." if len(self.calls) > 6 else "")
        how = "its cache's rows were reordered between steps" if self.reordered else "rows are reordered between steps"
        return RecordError(f"{self.name} ran one query per step on batches of {sizes} rows (a beam search with a "
                           f"cache: {how}): pass to_record(..., beam_rows=[the hypothesis' batch row at each of the "
                           f"{len(self.calls)} steps]), e.g. Hugging Face's output.beam_indices[i]")


def analyse(name: str, calls: Sequence[Tensor], reordered: bool = False) -> ModuleCalls:
    """Recognise how a module was called; one sentence naming the module when the calls are no decoding loop."""
    distinct = [calls[0]]
    for call in calls[1:]:
        if not same(call, distinct[-1]):
            distinct.append(call)
    if len(distinct) == 1:
        return ModuleCalls(name, tuple(distinct), "once")
    if _is_rerun(distinct):
        return ModuleCalls(name, tuple(distinct), "rerun")
    if _is_steps(distinct):
        return ModuleCalls(name, tuple(distinct), "steps", reordered)
    queries = ", ".join(str(c.shape[2]) for c in distinct[:8]) + (", ..." if len(distinct) > 8 else "")
    raise RecordError(f"{name} was called {len(distinct)} times on unrelated inputs (queries per call: {queries}), "
                      f"not as one decoding loop: record one sentence per `with record_attention(...)` block, or "
                      f"read each call from rec.calls['{name}']")


def same(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, atol=1e-6, rtol=0)


def extends(row: Tensor, earlier: Tensor) -> bool:
    """Whether `row` [H, Q, K] repeats `earlier` [H, Q-1, K'] in its first Q-1 queries (keys it did not
    have then are masked: zero) — the prefix computed again with one more token."""
    if row.shape[0] != earlier.shape[0] or row.shape[1] != earlier.shape[1] + 1 or row.shape[2] < earlier.shape[2]:
        return False
    old = row[:, :-1]
    return torch.allclose(old[..., : earlier.shape[2]], earlier, atol=SAME) and not bool(old[..., earlier.shape[2]:].any())


def parent(row: Tensor, previous: Tensor, preferred: int) -> int:
    """The row of the previous call that `row` continues (its own index when that one fits)."""
    order = [preferred] if preferred < previous.shape[0] else []
    for p in order + [p for p in range(previous.shape[0]) if p != preferred]:
        if extends(row, previous[p]):
            return p
    raise RecordError("a decoder row continues no row of the previous step")  # _is_rerun rules this out


def _is_rerun(calls: Sequence[Tensor]) -> bool:
    for prev, cur in zip(calls, calls[1:]):
        if cur.shape[1] != prev.shape[1] or cur.shape[2] != prev.shape[2] + 1:
            return False
        if not all(any(extends(cur[r], prev[p]) for p in range(prev.shape[0])) for r in range(cur.shape[0])):
            return False
    return True


def _is_steps(calls: Sequence[Tensor]) -> bool:
    return all(cur.shape[2] == 1 and cur.shape[1] == prev.shape[1] and cur.shape[3] >= prev.shape[3]
               for prev, cur in zip(calls, calls[1:]))
