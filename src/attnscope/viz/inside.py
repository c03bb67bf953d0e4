"""Inside one head's payload: every intermediate its views draw, for every kind, layer, head and step, as bytes.

The explorer's "inside" mode (ui/assets/explorer/inside*.js) draws sections 1-5 of the Inside one head page from
it: picking a kind, layer, head, step or query token is answered in the browser. Everything comes from one
teacher-forced pass over the whole translation (engine/inside/traced.py): the decoder is causal, so step t's
numbers are the first t+1 rows (and keys, for decoder self-attention) of it, which the browser cuts.

Layout: viz/explorer.py's (b"ATSX", a JSON header, float32 data). The header's "arrays" gives each array's
[offset, shape] in the data, by name:

- "<kind>.<layer>.<what>" for each attention sublayer: q, k, v (H, N, dh); scores, weights, bias (T5's
  self-attention only) (H, Q, K), -inf in the scores where masked; concat (Q, H·dh); output, residual, norm_input,
  norm_output, block_output (Q, D); w_o (D, H·dh) and b_o (D,) (where the model has one); gap (H, Q): max |Δ| of each
  softmax row against the attention recorded while translating.
- "source.<what>", "target.<what>": token_embedding, position, total (N, D) of each stack's first layer input.
- "memory" (S, D): the encoder's output, what cross-attention's keys and values are projected from.
- "lens.top_probs" (T, L, k), "lens.chosen_rank", "lens.chosen_prob" (T, L): the logit lens at every step; the
  header names its tokens.

A sentence whose every layer would pass `max_floats` carries the selected layer alone (of each kind, clamped to its
layers): the browser asks for another layer when it is picked, as the explorer's heatmaps do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from attnscope.records.attention import KIND_LABELS, KINDS, AttentionRecord, DecodeStep, Kind
from attnscope.records.forward import ForwardTrace, LogitLens, StreamInputs, SublayerTrace
from attnscope.viz.explorer import MAX_FLOATS, Selection, pack

ROWS = ("concat", "output", "residual", "norm_input", "norm_output", "block_output")


@dataclass(frozen=True)
class TracedSentence:
    """A translated sentence as Inside one head opens it: the trace of its whole translation, the logit lens at
    every step (its tokens as the vocabulary spells them), the attention recorded while translating and the steps."""

    trace: ForwardTrace
    lenses: Sequence[LogitLens]
    lens_tokens: Sequence[Sequence[Sequence[str]]]  # (T, L, k) the lens's top tokens
    lens_chosen: Sequence[str]  # (T,) the token chosen at each step, as the lens spells it
    record: AttentionRecord
    steps: Sequence[DecodeStep]
    embed_norm: bool  # the first layer's input is normalised (BART)

    def n_layers(self, kind: Kind) -> int:
        return sum(1 for k, _ in self.trace.sublayers if k == kind)

    @staticmethod
    def of(trace: ForwardTrace, lenses: Sequence[LogitLens], piece: Callable[[int], str], record: AttentionRecord,
           steps: Sequence[DecodeStep], embed_norm: bool) -> TracedSentence:
        """The sentence with its lens's tokens spelled by `piece` (the target vocabulary's)."""
        tokens = [[[piece(int(i)) for i in top] for top in lens.top_ids] for lens in lenses]
        return TracedSentence(trace, lenses, tokens, [piece(lens.chosen_id) for lens in lenses], record, steps, embed_norm)


def _sublayer(s: SublayerTrace, recorded: np.ndarray) -> dict[str, np.ndarray]:
    """One sublayer's arrays (see the module docstring), with each softmax row's gap to the recorded one."""
    out = {"q": s.q, "k": s.k, "v": s.v, "scores": s.scores, "weights": s.weights, "w_o": s.w_o,
           **{name: getattr(s, name) for name in ROWS}}
    if s.bias is not None:
        out["bias"] = s.bias
    if s.b_o is not None:
        out["b_o"] = s.b_o
    n_q, n_k = s.weights.shape[1:]
    out["gap"] = np.abs(s.weights - recorded[:, :n_q, :n_k]).max(-1)
    return out


def layer_arrays(traced: TracedSentence, layer: int) -> dict[str, np.ndarray]:
    """Every kind's sublayer at `layer` (clamped to each kind's layers), by payload name."""
    out = {}
    for kind in KINDS:
        at = min(layer, traced.n_layers(kind) - 1)
        recorded = traced.record.array(kind)[at]
        out.update({f"{kind}.{at}.{name}": a for name, a in _sublayer(traced.trace.sublayer(kind, at), recorded).items()})
    return out


def _stream(name: str, e: StreamInputs) -> dict[str, np.ndarray]:
    return {f"{name}.token_embedding": e.token_embedding, f"{name}.position": e.position, f"{name}.total": e.total}


def shared_arrays(traced: TracedSentence) -> dict[str, np.ndarray]:
    """What every layer's views read: the stacks' inputs, the encoder's output and the logit lens."""
    t, lenses = traced.trace, traced.lenses
    return {**_stream("source", t.source), **_stream("target", t.target), "memory": t.memory,
            "lens.top_probs": np.stack([x.top_probs for x in lenses]),
            "lens.chosen_rank": np.stack([x.chosen_rank for x in lenses]).astype(np.float32),
            "lens.chosen_prob": np.stack([x.chosen_prob for x in lenses])}


@dataclass(frozen=True)
class Block:
    """Arrays laid out as float32 bytes: each one's [offset, shape] (in floats, from the block's start)."""

    table: dict[str, list]
    data: bytes

    @property
    def n_floats(self) -> int:
        return len(self.data) // 4

    @staticmethod
    def of(arrays: dict[str, np.ndarray]) -> Block:
        table, parts, offset = {}, [], 0
        for name, array in arrays.items():
            a = np.ascontiguousarray(array, dtype="<f4")
            table[name] = [offset, list(a.shape)]
            parts.append(a.tobytes())
            offset += a.size
        return Block(table, b"".join(parts))


def n_floats(traced: TracedSentence) -> int:
    """Floats of every sublayer of the sentence (what a payload of every layer carries besides the shared arrays)."""
    return sum(a.size for s in traced.trace.sublayers.values() for a in (s.q, s.k, s.v, s.scores, s.weights, s.w_o,
               *(getattr(s, name) for name in ROWS), *((s.bias,) if s.bias is not None else ())))


def present_layers(traced: TracedSentence, layer: int, max_floats: int = MAX_FLOATS) -> list[int]:
    """Every layer, or, when that passes `max_floats`, `layer` alone."""
    every = max(traced.n_layers(kind) for kind in KINDS)
    return list(range(every)) if n_floats(traced) <= max_floats else [layer]


def payload(traced: TracedSentence, shared: Block, layers: Sequence[Block], *, view_id: str, selection: Selection, query: int,
            epoch: int, present: Sequence[int]) -> bytes:
    """The bytes of the explorer's "inside" mode: `shared` (shared_arrays) and the blocks of the `present` layers
    (layer_arrays), opened on `selection` and the `query` position of its kind. `view_id` and `epoch` work as in
    viz/explorer.payload: the browser keeps its own selection while they stay."""
    t, record = traced.trace, traced.record
    table, offset = {}, 0
    for block in (shared, *layers):
        table.update({name: [start + offset, shape] for name, (start, shape) in block.table.items()})
        offset += block.n_floats
    kinds = {kind: {"n_layers": traced.n_layers(kind), "heads": t.sublayer(kind, 0).q.shape[0],
                    "queries": t.sublayer(kind, 0).q.shape[1], "keys": t.sublayer(kind, 0).k.shape[1],
                    "layers": sorted({min(layer, traced.n_layers(kind) - 1) for layer in present}),
                    "scale": t.sublayer(kind, 0).scale} for kind in KINDS}
    header = {"id": view_id, "epoch": epoch, "mode": "inside", "labels": KIND_LABELS,
              "source": list(record.source_tokens), "target": list(record.target_tokens),
              "output": [s.token for s in traced.steps], "selection": {**selection.as_dict(), "query": query},
              "kinds": kinds, "norm": t.norm, "norm_kind": t.norm_kind, "relative": t.relative,
              "embed_norm": traced.embed_norm, "scales": {"source": t.source.scale, "target": t.target.scale},
              "lens": {"top": [[list(top) for top in step] for step in traced.lens_tokens], "chosen": list(traced.lens_chosen)},
              "arrays": table,
              "complete": all(len(info["layers"]) == info["n_layers"] for info in kinds.values())}
    return pack(header, b"".join(block.data for block in (shared, *layers)))
