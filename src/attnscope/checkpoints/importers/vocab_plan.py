"""A vocabulary trained elsewhere in attnscope's order: its special tokens at ids 0-3, every other id after them.

attnscope reserves <pad> <bos> <eos> <unk> at ids 0-3. The plan says which original id each of
our ids is; embedding rows, output rows and the output bias are permuted by it, so every logit is
the original's logit for that token. A model without a <bos> of its own (Marian: its decoder starts
on <pad>) gets one extra row that is never read and never output (config.suppressed).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError


@dataclass(frozen=True)
class VocabPlan:
    """order[i] is the original id of our id i; None marks a row the original lacks."""

    order: tuple[int | None, ...]

    @classmethod
    def build(cls, size: int, *, pad: int, bos: int | None, eos: int, unk: int) -> "VocabPlan":
        """Specials first (pad, bos, eos, unk), then the other ids in the original order."""
        first = (pad, bos, eos, unk)
        given = [i for i in first if i is not None]
        if len(set(given)) < len(given) or any(not 0 <= i < size for i in given):
            raise CheckpointError(f"the special tokens pad={pad}, bos={bos}, eos={eos}, unk={unk} are not distinct ids "
                                  f"of a {size:,}-token vocabulary")
        return cls(first + tuple(i for i in range(size) if i not in set(given)))

    @property
    def size(self) -> int:
        return len(self.order)

    @cached_property
    def _ours(self) -> dict[int, int]:
        return {old: new for new, old in enumerate(self.order) if old is not None}

    def ours(self, original: int) -> int:
        """Our id of an original id."""
        try:
            return self._ours[int(original)]
        except KeyError:
            raise CheckpointError(f"token id {original} is outside the model's vocabulary of {self.size:,}") from None

    def has(self, original: int) -> bool:
        return int(original) in self._ours

    @property
    def virtual(self) -> tuple[int, ...]:
        """Our ids of rows the original lacks."""
        return tuple(i for i, old in enumerate(self.order) if old is None)

    def rows(self, table: Tensor) -> Tensor:
        """The rows of `table` (original order along dim 0) in our order; zeros for rows the original lacks."""
        if table.shape[0] != sum(old is not None for old in self.order):
            raise CheckpointError(f"a vocabulary tensor has {table.shape[0]:,} rows but the vocabulary has "
                                  f"{self.size - len(self.virtual):,} tokens")
        index = torch.tensor([0 if old is None else old for old in self.order])
        out = table.index_select(0, index)
        if self.virtual:
            out[list(self.virtual)] = 0
        return out
