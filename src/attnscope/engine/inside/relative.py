"""T5's relative position bias as the Positional page draws it: each head's learned bias by offset key − query, read
from the stack's table through `relative_bucket` itself (the function the model calls), and which offsets share a
bucket. Pure: it runs no forward pass, it only indexes the table."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnscope.model.positions import RelativePositionBias, relative_bucket
from attnscope.model.transformer import Transformer


@dataclass(frozen=True)
class BucketRange:
    """The offsets of the span that fall into one bucket."""

    bucket: int
    first: int  # the offset nearest 0
    last: int  # the offset farthest from 0 within the span
    exact: bool  # a bucket of its own for one offset (distances below half the buckets)
    open_ended: bool  # the last bucket of its direction: every offset beyond the span shares it too

    @property
    def offsets(self) -> str:
        """The offsets as text: "−3", "−8 … −5" (the one nearest 0 first), "≤ −16" for an open-ended bucket."""
        def num(x: int) -> str:
            return f"{x}".replace("-", "−")
        if self.open_ended:
            return f"{'≥' if self.last > 0 else '≤'} {num(self.first)}"
        return num(self.first) if self.first == self.last else f"{num(self.first)} … {num(self.last)}"


@dataclass(frozen=True)
class RelativeBias:
    """One stack's bias: bias[h, i] is what head h adds to the score of a key offsets[i] positions after its query."""

    stack: str  # "encoder" (bidirectional) or "decoder" (causal: later keys are masked, offsets ≤ 0 only)
    offsets: np.ndarray  # (N,) key − query, ascending
    buckets: np.ndarray  # (N,) the bucket of each offset
    bias: np.ndarray  # (H, N)
    ranges: tuple[BucketRange, ...]  # every bucket met in the span, in bucket order


def shared_from(model: Transformer, stack: str) -> int:
    """The distance from which every farther offset of `stack` falls into its direction's last bucket, found by
    `relative_bucket` itself: the logarithmic buckets reach the last one well before relative_max_distance
    (t5-small's encoder at 91, not 128), since the bucket is cut to a whole number."""
    table = _table(model, stack)
    distances = torch.arange(0, table.max_distance + 1)
    buckets = relative_bucket(-distances, table.table.num_embeddings, table.max_distance, table.bidirectional)
    changing = distances[buckets != buckets[-1]]  # at max_distance and beyond: the last bucket
    return int(changing.max()) + 1


def span(model: Transformer) -> int:
    """How far the offsets drawn reach: a quarter beyond where the stacks' last buckets start (shared_from), but
    no farther than the model's longest sequence allows (max_len − 1)."""
    start = max(shared_from(model, stack) for stack in ("encoder", "decoder"))
    return min(model.config.max_len - 1, start + max(start // 4, 2))


def _table(model: Transformer, stack: str) -> RelativePositionBias:
    """The relative position bias of `stack`'s first layer (the one every layer of the stack adds)."""
    table = (model.encoder if stack == "encoder" else model.decoder)[0].relative_bias
    if table is None:
        raise ValueError(f"this model's {stack} has no relative position bias (positional {model.config.positional!r})")
    return table


def relative_bias(model: Transformer, stack: str, reach: int) -> RelativeBias:
    """The learned bias of `stack` ("encoder" or "decoder") for offsets −reach .. reach (the decoder: −reach .. 0)."""
    table = _table(model, stack)
    offsets = torch.arange(-reach, (reach if table.bidirectional else 0) + 1)
    buckets = relative_bucket(offsets, table.table.num_embeddings, table.max_distance, table.bidirectional)
    bias = table.table.weight.detach().float().cpu()[buckets].T  # (H, N)
    return RelativeBias(stack, offsets.numpy(), buckets.numpy(), bias.numpy(),
                        _ranges(offsets.numpy(), buckets.numpy(), table.table.num_embeddings, table.bidirectional))


def _ranges(offsets: np.ndarray, buckets: np.ndarray, n_buckets: int, bidirectional: bool) -> tuple[BucketRange, ...]:
    """Each bucket's offsets, nearest 0 first; exact buckets hold one offset below half a direction's buckets."""
    per_direction = n_buckets // 2 if bidirectional else n_buckets  # the encoder's later keys: the upper half
    out = []
    for b in sorted(set(buckets.tolist())):
        members = offsets[buckets == b]
        near, far = (members.min(), members.max()) if members.min() >= 0 else (members.max(), members.min())
        out.append(BucketRange(int(b), int(near), int(far), b % per_direction < per_direction // 2,
                               b % per_direction == per_direction - 1))  # buckets grow with distance: the last one
    #   met in a direction reaches the span's edge and beyond
    return tuple(out)
