"""Which input a tensor was computed from, so that attention is told apart by structure, not by names.

While a recording runs, every torch call of the user's code passes through the recorder's
TorchFunctionMode (attention_mode.py), which asks `Streams.label` for its result. A stream is a set
of ids. A result computed from one activation, alone or with the model's own weights (a projection,
a reshape, a transpose, a norm, a scaling by a constant, a repeat for a beam, a gather) keeps that
activation's streams; joining tensors (cat, stack, writing into a buffer: a KV cache appending this
step's keys) unites them; integer tensors (token ids, masks) keep their first input's streams;
mixing two different activations (a residual sum, attention's weighted sum) starts a new stream.
So self-attention's queries and keys share a stream (both are projections of one tensor), and
cross-attention's keys carry the encoder output's stream, which its queries do not, however the
memory was repeated, cached or reordered and whatever the modules are called.

Picking batch rows of an activation by index (a beam search reordering its cache: `index_select(0,
beam_idx)`, `cache[beam_idx]`) adds a `reordered` id to the result's streams, so that attention over
such keys is known to have had its rows moved between steps.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

Stream = frozenset[int]
NONE: Stream = frozenset()  # computed from the model's own weights and constants only

JOINS: frozenset[Callable[..., Any]] = frozenset(
    {torch.cat, torch.concat, torch.concatenate, torch.stack, torch.hstack, torch.vstack,
     # writing into a tensor (a preallocated cache, a sequence buffer) joins what was written to what was there
     Tensor.__setitem__, Tensor.index_copy_, Tensor.index_copy, torch.index_copy, Tensor.index_put_,
     Tensor.index_put, Tensor.copy_, Tensor.scatter_, Tensor.scatter, Tensor.slice_scatter, torch.slice_scatter,
     Tensor.masked_scatter_})
# Calls that read a second tensor only for its dtype, device or shape: the result is the first one's.
LIKE: frozenset[Callable[..., Any]] = frozenset(
    {Tensor.type_as, Tensor.to, Tensor.expand_as, Tensor.view_as, Tensor.reshape_as})
# Calls that make a new tensor of another one's shape, not of its values.
GATHERS: frozenset[Callable[..., Any]] = frozenset({Tensor.index_select, torch.index_select, Tensor.__getitem__})
FRESH: frozenset[Callable[..., Any]] = frozenset(
    {torch.zeros_like, torch.ones_like, torch.full_like, torch.empty_like, torch.rand_like, torch.randn_like,
     Tensor.new_zeros, Tensor.new_ones, Tensor.new_full, Tensor.new_empty, Tensor.new_tensor})


def tensors_in(args: Iterable[Any]) -> list[Tensor]:
    """The tensors among call arguments, also inside lists and tuples (torch.cat's first argument)."""
    found = []
    for a in args:
        if isinstance(a, Tensor):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(t for t in a if isinstance(t, Tensor))
    return found


class Streams:
    """The stream of every tensor seen while recording; the model's own float tensors (parameters, buffers
    such as positional tables) belong to none. Its integer tensors (token ids kept in a buffer) are data."""

    def __init__(self, constants: Iterable[Tensor]) -> None:
        self._of: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._ids = itertools.count()
        self.reordered: set[int] = set()  # ids marking rows picked by index along the batch axis
        for t in constants:
            if t.is_floating_point():
                self._of[t] = NONE

    def new(self) -> Stream:
        return frozenset((next(self._ids),))

    def of(self, t: Tensor) -> Stream:
        """A tensor's stream; one made outside the recording (an input, a memory computed before) starts its own."""
        found = self._of.get(t)
        if found is None:
            found = self._of[t] = self.new()
        return found

    def label(self, func: Callable[..., Any], args: tuple, inputs: list[Tensor], outputs: list[Tensor]) -> None:
        """Give the results of one torch call their stream (see the module docstring)."""
        if func is Tensor.__setitem__:
            outputs = inputs[:1]  # written in place, returns None
        if not outputs:
            return
        stream = self._result(func, inputs)
        if func in GATHERS and stream and picks_rows(func, args):
            mark = self.new()
            self.reordered.update(mark)
            stream = stream | mark
        for t in outputs:
            self._of[t] = stream

    def _result(self, func: Callable[..., Any], inputs: list[Tensor]) -> Stream:
        if not inputs or func in FRESH:
            return self.new()  # a tensor made from Python data (token ids, a mask, positions) or a blank one
        if func in LIKE:
            inputs = inputs[:1]
        floats: list[Stream] = []
        scalars: list[Stream] = []  # one-element tensors: a scale or a temperature beside an activation
        others: list[Stream] = []
        for t in inputs:
            stream = self.of(t)
            if stream:
                (others if not t.is_floating_point() else floats if t.numel() > 1 else scalars).append(stream)
        floats = floats or scalars
        if func in JOINS:
            return NONE.union(*(floats or others))
        distinct = set(floats)
        if len(distinct) > 1:
            return self.new()
        if distinct:
            return floats[0]
        return others[0] if others else NONE  # from token ids (an embedding lookup, a mask), or constants only


def picks_rows(func: Callable[..., Any], args: tuple) -> bool:
    """Whether a gather picks batch rows of a float tensor by a tensor of indices (not simply all rows in order)."""
    source = args[0] if args else None
    if not isinstance(source, Tensor) or not source.is_floating_point():
        return False
    if func is Tensor.__getitem__:
        index = args[1] if len(args) > 1 else None
        index = index[0] if isinstance(index, tuple) and index else index
        if not isinstance(index, Tensor) or index.dtype == torch.bool:
            return isinstance(index, Tensor)
    else:
        dim, index = (args[1], args[2]) if len(args) > 2 else (None, None)
        if dim not in (0, -source.dim()) or not isinstance(index, Tensor):
            return False
    flat = index.reshape(-1)
    return not (flat.numel() == source.shape[0] and torch.equal(flat.cpu(), torch.arange(source.shape[0])))
