"""A vocabulary trained elsewhere as the imported model numbers it: the original's own ids, and where its special
tokens are (the model's config names the same ids, so nothing is permuted or padded).

Only when a model's two vocabularies put their special tokens at different ids (a state_dict's source and
target files, say) does the source side move: its specials swap rows with the tokens at the target's ids, so
one numbering of the specials serves both sides. `order` says which original id each of our ids is; the
embedding rows, output rows and output bias are read through it, so every logit is the original's logit for
that token. A model without a <bos> of its own (Marian: its decoder starts on <pad>) uses <pad> as its start.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from attnscope.checkpoints.checkpoint import CheckpointError

ROLES = ("pad", "bos", "eos", "unk")


@dataclass(frozen=True)
class VocabPlan:
    """order[i] is the original id of our id i; pad, bos, eos and unk are our ids of the special tokens."""

    order: tuple[int, ...]
    pad: int
    bos: int
    eos: int
    unk: int

    @classmethod
    def build(cls, size: int, *, pad: int, bos: int | None, eos: int, unk: int,
              at: "VocabPlan | None" = None) -> "VocabPlan":
        """The original's order (bos None: <pad> starts the decoder), or with `at`, the specials moved to `at`'s ids."""
        given = {"pad": pad, "eos": eos, "unk": unk, **({} if bos is None else {"bos": bos})}
        if len(set(given.values())) < len(given) or any(not 0 <= i < size for i in given.values()):
            raise CheckpointError(f"the special tokens pad={pad}, bos={bos}, eos={eos}, unk={unk} are not distinct ids "
                                  f"of a {size:,}-token vocabulary")
        ids = {**given, "bos": pad if bos is None else bos}
        order = list(range(size))
        if at is not None:
            for role in ROLES:
                target = getattr(at, role)
                if role == "bos" and (bos is None or at.bos == at.pad):
                    continue  # no <bos> of its own on one side: <pad> stands for it
                if not 0 <= target < size:
                    raise CheckpointError(f"the target vocabulary's {role} id {target} is outside the source vocabulary "
                                          f"of {size:,} tokens")
                here = order.index(ids[role])
                order[here], order[target] = order[target], order[here]
            ids = {role: getattr(at, role) for role in ROLES}
        return cls(tuple(order), **ids)

    @property
    def size(self) -> int:
        return len(self.order)

    @cached_property
    def _ours(self) -> dict[int, int]:
        return {old: new for new, old in enumerate(self.order)}

    def ours(self, original: int) -> int:
        """Our id of an original id."""
        try:
            return self._ours[int(original)]
        except KeyError:
            raise CheckpointError(f"token id {original} is outside the model's vocabulary of {self.size:,}") from None

    def has(self, original: int) -> bool:
        return int(original) in self._ours

    def rows(self, table: Tensor) -> Tensor:
        """The rows of `table` (original order along dim 0) in our order."""
        if table.shape[0] != self.size:
            raise CheckpointError(f"a vocabulary tensor has {table.shape[0]:,} rows but the vocabulary has "
                                  f"{self.size:,} tokens")
        if self.order == tuple(range(self.size)):
            return table
        return table.index_select(0, torch.tensor(self.order))
