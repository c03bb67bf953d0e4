"""The model's named hook points: every tensor the engine may read or replace, in one table (`POINTS`).

Each module that computes such tensors keeps a `HookPoints` of its site (the stacks, each layer, each residual
block, each attention module) as `hooks` and passes the tensors through `hooks.at(POINT, tensor)`. Code outside the
model registers on a point by its row (`hooks.listen(cleanup, PATTERN, listener)`), never by reaching into modules:
a listener sees the tensor as the model computed it and may return a replacement (a head gate, saliency's scaled
embeddings). Listeners hear only calls from the thread that registered them (sessions share one model, each under
its lock). A point nobody listens to costs one check of an empty dict; the attention's weights are made only when
someone listens to `SCORES` or `PATTERN` (otherwise the fused kernel runs, see attention.py).

A new hooked tensor is one row here and one `hooks.at` where the model computes it.
"""
from __future__ import annotations

import threading
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

from torch import nn

T = TypeVar("T")
Listener = Callable[[Any], Any]  # hears a point's value; returns a replacement, or None to leave it as it is

ENCODER, DECODER, LAYER, BLOCK, ATTENTION = "encoder", "decoder", "layer", "block", "attention"  # the sites


@dataclass(frozen=True, eq=False)
class Point:
    """One row of the table: a tensor the model passes through its hook points, where it does and its shape."""

    name: str
    sites: tuple[str, ...]
    shape: str
    what: str


STACKS = (ENCODER, DECODER)
EMBED = Point("embed", STACKS, "(B, N, D)", "rows of the token embedding table, before scaling")
POS = Point("pos", STACKS, "(N, D)", "positional encodings of positions offset..offset+N-1 (zeros for T5)")
EMBEDDED = Point("embedded", STACKS, "(B, N, D)",
                 "what the stack's first layer reads: embedding × scale + position, normed (BART), after dropout")
MEMORY = Point("memory", (ENCODER,), "(B, S, D)", "the encoder's output, after its final norm if any")
FINAL = Point("final", (DECODER,), "(B, T, D)", "the decoder's last layer's output, every row, before its final norm")
RESID_PRE = Point("resid_pre", (LAYER, BLOCK), "(B, N, D)", "the residual stream entering the layer or block")
NORM_IN = Point("norm_in", (BLOCK,), "(B, N, D)", "what the block's LayerNorm reads (pre-LN: x; post-LN: x + sublayer)")
NORM_OUT = Point("norm_out", (BLOCK,), "(B, N, D)", "what the block's LayerNorm returns")
RESID_POST = Point("resid_post", (LAYER, BLOCK), "(B, N, D)", "the residual stream leaving the layer or block")
Q = Point("q", (ATTENTION,), "(B, H, Q, dh)", "the queries, projected and split into heads")
K = Point("k", (ATTENTION,), "(B, H, K, dh)", "the keys attention reads (with the KV cache: every position so far)")
V = Point("v", (ATTENTION,), "(B, H, K, dh)", "the values, as the keys")
MASK = Point("mask", (ATTENTION,), "(B or 1, 1, Q or 1, K) bool, or None",
             "True where a query may see a key; None: every key everywhere")
BIAS = Point("bias", (ATTENTION,), "(1, H, Q, K), or None",
             "the relative position bias added to q·k (T5's self-attention); None without one")
SCORES = Point("scores", (ATTENTION,), "(B, H, Q, K)",
               "what the softmax reads: q·k/√dh (q·k for T5) plus the bias, -inf where masked")
PATTERN = Point("pattern", (ATTENTION,), "(B, H, Q, K)", "the attention weights, after the softmax, before dropout")
Z = Point("z", (ATTENTION,), "(B, Q, H·dh)", "every head's output side by side: the input of W_O")
RESULT = Point("result", (ATTENTION,), "(B, Q, D)", "the attention's output, after W_O")

POINTS: tuple[Point, ...] = (EMBED, POS, EMBEDDED, MEMORY, FINAL, RESID_PRE, NORM_IN, NORM_OUT, RESID_POST,
                             Q, K, V, MASK, BIAS, SCORES, PATTERN, Z, RESULT)


class HookPoints:
    """The hook points of one module (its site's rows of the table) and who listens to them.

    Kept as a plain attribute, not a submodule: it holds no weights and adds nothing to the model's modules."""

    def __init__(self, site: str) -> None:
        self.site = site
        self.listeners: dict[str, list[tuple[int, Listener]]] = {}  # by point name; empty while nobody listens

    @property
    def points(self) -> tuple[Point, ...]:
        """The table's rows at this site (read from the table, so a copied model's points are still its rows)."""
        return tuple(p for p in POINTS if self.site in p.sites)

    def at(self, point: Point, value: T) -> T:
        """`value`, as each listener of `point` on this thread heard it and perhaps replaced it."""
        if not self.listeners:
            return value
        me = threading.get_ident()
        for thread, listener in self.listeners.get(point.name, ()):
            if thread == me:
                replaced = listener(value)
                value = value if replaced is None else replaced
        return value

    def hears(self, point: Point) -> bool:
        """Whether anyone listens to `point` here (the attention makes its weights only then)."""
        return point.name in self.listeners

    def listen(self, cleanup: ExitStack, point: Point, listener: Listener) -> None:
        """Have `listener` hear `point` here, on this thread, until `cleanup` closes."""
        if point not in self.points:
            raise ValueError(f"hook point {point.name!r} is not at a {self.site} (it is at: {', '.join(point.sites)})")
        entry = (threading.get_ident(), listener)
        self.listeners.setdefault(point.name, []).append(entry)
        cleanup.callback(self._remove, point.name, entry)

    def _remove(self, name: str, entry: tuple[int, Listener]) -> None:
        entries = self.listeners[name]
        entries.remove(entry)
        if not entries:
            del self.listeners[name]


def sites(model: nn.Module) -> Iterator[tuple[str, HookPoints]]:
    """Every module of `model` that has hook points, by its dotted name, in the order of named_modules()."""
    for name, module in model.named_modules():
        hooks = vars(module).get("hooks")
        if isinstance(hooks, HookPoints):
            yield name, hooks
