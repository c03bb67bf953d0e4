"""The check every figure builder makes at its boundary: as many labels as the array has rows or columns."""
from __future__ import annotations

from typing import Sequence


def check_labels(n: int, labels: Sequence[str], what: str) -> None:
    """Raise a ValueError naming the tokens when `labels` do not label all `n` entries of an axis."""
    if n != len(labels):
        raise ValueError(f"the weights have {n} {what} but there are {len(labels)} labels: {list(labels)}")
