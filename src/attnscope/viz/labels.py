"""What every figure builder shares at its boundary: the check that there are as many labels as the array has
rows or columns, and the name of the values drawn (weights unless the caller says otherwise)."""
from __future__ import annotations

from typing import Sequence

WEIGHT = "weight"  # attention weights: bounded by 0 and 1; any other value label (e.g. a norm) is scaled to its data


def check_labels(n: int, labels: Sequence[str], what: str) -> None:
    """Raise a ValueError naming the tokens when `labels` do not label all `n` entries of an axis."""
    if n != len(labels):
        raise ValueError(f"the weights have {n} {what} but there are {len(labels)} labels: {list(labels)}")
