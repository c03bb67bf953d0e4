"""The tracer of attnscope's own model: what one forward pass computed, chosen by flags.

`Keep` says what to keep: the softmaxed weights of every head (which the model returns when asked); the
internals of each attention call (q, k, v, scores, mask, the heads side by side, the output); the residual
stream (embeddings, positions, each layer's input and output, each residual block and its LayerNorm).
`tracing()` listens to the model's hook points for what the model does not return (model/hooks.py names them
all), under the model's lock and in eval mode, and collects every call made from the thread that listens into
`Calls` (`install` alone listens on a model whose caller holds the lock already; record_attention uses its
weights-only listeners on models built of attnscope's attention). Nothing is recomputed: the values are the
tensors the model passed through its hook points.

`trace()` runs one teacher-forced pass (with or without the KV cache) and returns one `Trace`, which
attribution reads (engine/attribution) and the inside view turns into plain numpy data (inside/traced.py).
"""
from __future__ import annotations

import math
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from functools import partial
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnscope.engine.recording.sharing import eval_mode
from attnscope.engine.recording.steps import join_steps
from attnscope.engine.recording.trace import EVERYTHING, WEIGHTS, BlockStream, Embedded, Internals, Keep, Layer, Sublayer, Trace
from attnscope.model import hooks
from attnscope.model.attention import MultiHeadAttention
from attnscope.model.blocks import Residual
from attnscope.model.hooks import Point
from attnscope.model.layers import DecoderLayer, EncoderLayer
from attnscope.model.transformer import DecoderCache, Transformer

# The hook points Keep.internals listens to, and Keep.stream.
INTERNALS = (hooks.Q, hooks.K, hooks.V, hooks.MASK, hooks.BIAS, hooks.SCORES, hooks.Z, hooks.RESULT)
STREAM = (hooks.EMBED, hooks.POS, hooks.EMBEDDED, hooks.MEMORY,
          hooks.RESID_PRE, hooks.NORM_IN, hooks.NORM_OUT, hooks.RESID_POST)


class Calls:
    """What the hook points heard, call by call: `weights` by attention module name (capture hands its recording's
    dict); everything else by the name of the module whose point it is, and the point."""

    def __init__(self, weights: dict[str, list[Tensor]] | None = None) -> None:
        self.weights: dict[str, list[Tensor]] = {} if weights is None else weights
        self.seen: dict[tuple[str, Point], list[Any]] = defaultdict(list)

    def keep(self, name: str, point: Point, value: Any) -> None:
        self.seen[(name, point)].append(value)

    def of(self, name: str, point: Point) -> list[Any]:
        return self.seen[(name, point)]


@contextmanager
def tracing(model: nn.Module, keep: Keep = WEIGHTS) -> Iterator[Calls]:
    """Listeners for what `keep` asks, in eval mode; yields the `Calls` they fill and removes them on leaving (also
    after an error). A shared model is traced under its lock, which its caller holds (Translator.inference())."""
    calls, attention = Calls(), {name: m for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)}
    with eval_mode(model), ExitStack() as listening:
        install(listening, model, keep, calls, attention)
        yield calls


def install(listening: ExitStack, model: nn.Module, keep: Keep, calls: Calls,
            attention: dict[str, MultiHeadAttention]) -> None:
    """The listeners of `tracing`, each removed by `listening`, for a caller that holds the model's lock and runs it in
    eval mode already (capture, before every translation, with its attention modules found). Weights and
    internals work on any module built of attnscope's attention; the stream needs a `Transformer` or one layer."""
    if keep.stream and not isinstance(model, (Transformer, EncoderLayer, DecoderLayer)):
        raise TypeError(f"the residual stream is traced on attnscope's Transformer or one of its layers, "
                        f"not {type(model).__name__}")
    if keep.weights:
        for name, m in attention.items():
            m.hooks.listen(listening, hooks.PATTERN, partial(_keep_weights, calls.weights, name))
    wanted = (INTERNALS if keep.internals else ()) + (STREAM if keep.stream else ())
    for name, site in hooks.sites(model) if wanted else ():
        for point in (p for p in site.points if p in wanted):
            site.listen(listening, point, partial(calls.keep, name, point))


def _keep_weights(into: dict[str, list[Tensor]], name: str, weights: Tensor) -> None:
    """The weights-only route (record_attention on a model built of attnscope's attention): append each call's
    weights, as the PATTERN hook point passes them, to into[name]; nothing else."""
    # detach only a tensor with a graph: a new tensor object costs
    into.setdefault(name, []).append(weights.detach() if weights.requires_grad else weights)


@torch.no_grad()
def trace(model: Transformer, source_ids: Sequence[int], target_ids: Sequence[int], *, keep: Keep = EVERYTHING,
          use_cache: bool = False) -> Trace:
    """Run the model once on a source and a decoder input (<bos> y1 .. y_t) and keep what `keep` asks for.

    Without `use_cache`, all target positions in one pass under the causal mask (what attribution reads);
    with it, the decoder runs as decoding does: one position per step, keys and values from the KV cache.
    """
    device = next(model.parameters()).device
    src = torch.tensor([list(source_ids)], dtype=torch.long, device=device)
    tgt = torch.tensor([list(target_ids)], dtype=torch.long, device=device)
    with tracing(model, Keep(weights=False, internals=keep.internals, stream=keep.stream)) as calls:
        source = model.encode(src, output_attentions=keep.weights)
        if use_cache:
            cache = DecoderCache.empty(len(model.decoder))
            steps = [model.decode(tgt[:, t:t + 1], source, cache, output_attentions=keep.weights)
                     for t in range(tgt.shape[1])]
        else:
            steps = [model.decode(tgt, source, output_attentions=keep.weights)]
    weights = {}
    if keep.weights:
        names = model.attention_by_kind()
        weights = {**dict(zip(names["encoder"], source.attentions)),
                   **{name: join_steps([s.self_attentions[i] for s in steps]) for i, name in enumerate(names["decoder"])},
                   **{name: join_steps([s.cross_attentions[i] for s in steps]) for i, name in enumerate(names["cross"])}}
    logits = torch.cat([s.logits for s in steps], 1)
    return _assemble(model, calls, weights, keep, tuple(source_ids), tuple(target_ids), use_cache, logits)


@torch.no_grad()
def trace_layer(layer: EncoderLayer | DecoderLayer, index: int, run: Callable[[], Tensor]) -> Layer:
    """Layer `index` of a stack, traced with everything kept while `run()` calls it once (the caller hands it its
    input, masks and bias): what attribution reads of one layer when the layers of a pass are run one at a time
    (engine/attribution/exact_pass.py). The weights are the ones the PATTERN hook point passed: one call each."""
    calls, names = Calls(), {m: name for name, m in layer.named_modules()}
    attention = {name: m for m, name in names.items() if isinstance(m, MultiHeadAttention)}
    with eval_mode(layer), ExitStack() as listening:
        install(listening, layer, EVERYTHING, calls, attention)
        run()
    return _layer(calls, names, {name: w[0] for name, w in calls.weights.items()}, EVERYTHING, layer, index)


def _layer(calls: Calls, names: dict[nn.Module, str], weights: dict[str, Tensor], keep: Keep,
           m: EncoderLayer | DecoderLayer, i: int) -> Layer:
    """Layer `i`'s part of what the listeners heard (`names`: the dotted name of each module they listened on)."""
    def sublayer(attn: MultiHeadAttention, block: Residual) -> Sublayer:
        return Sublayer(attn.kind, i, attn, block, weights.get(names[attn]),
                        _internals(calls, names[attn]) if keep.internals else None,
                        _block_stream(calls, names[block]) if keep.stream else None)

    inputs, output = _io(calls, names[m]) if keep.stream else (None, None)
    return Layer(m, inputs, output, *(sublayer(attn, block) for attn, block in m.attention_blocks()))


def _assemble(model: Transformer, calls: Calls, weights: dict[str, Tensor], keep: Keep, source_ids: tuple[int, ...],
              target_ids: tuple[int, ...], use_cache: bool, logits: Tensor) -> Trace:
    names = {m: name for name, m in model.named_modules()}

    def layer(m: EncoderLayer | DecoderLayer, i: int) -> Layer:
        return _layer(calls, names, weights, keep, m, i)

    def embedded(stack: nn.Module) -> Embedded:
        of = partial(calls.of, names[stack])
        scale = model.embedding_scale
        return Embedded(_rows(of(hooks.EMBED)), scale, _rows(of(hooks.POS), 0), _rows(of(hooks.EMBEDDED)))

    stream = keep.stream
    return Trace(source_ids, target_ids, keep, use_cache,
                 tuple(layer(m, i) for i, m in enumerate(model.encoder)), tuple(layer(m, i) for i, m in enumerate(model.decoder)),
                 logits, embedded(model.encoder) if stream else None, embedded(model.decoder) if stream else None,
                 calls.of(names[model.encoder], hooks.MEMORY)[0] if stream else None)


def _rows(calls: list[Tensor], dim: int = 1) -> Tensor:
    """Every call joined along the sequence `dim` (one call per step when decoding with a cache)."""
    return calls[0] if len(calls) == 1 else torch.cat(calls, dim)


def _mask(queries: list[Tensor], keys: list[Tensor], masks: list[Tensor | None]) -> Tensor | None:
    """The masks of every call as one (B, 1, Q, K) mask of the joined rows; a call's None allows each key it had.
    None when every call allowed every key (cross-attention to an unpadded source)."""
    n_keys = keys[-1].shape[2]
    if len(masks) == 1 or all(mask is None and k.shape[2] == n_keys for k, mask in zip(keys, masks)):
        return masks[-1]
    rows = []
    for q, k, mask in zip(queries, keys, masks):
        shape = (q.shape[0], 1, q.shape[2], k.shape[2])
        allowed = torch.ones(shape, dtype=torch.bool, device=q.device) if mask is None else mask.expand(shape)
        rows.append(F.pad(allowed, (0, n_keys - k.shape[2]), value=False))
    return torch.cat(rows, 2)


def _internals(calls: Calls, name: str) -> Internals:
    of = partial(calls.of, name)
    biases = of(hooks.BIAS)
    bias = None if biases[0] is None else join_steps(biases)  # keys a step had not: 0, masked anyway
    queries, keys = of(hooks.Q), of(hooks.K)
    return Internals(queries=_rows(queries, 2), keys=keys[-1], values=of(hooks.V)[-1],  # the last call's: every key
                     scores=join_steps(of(hooks.SCORES), -math.inf), mask=_mask(queries, keys, of(hooks.MASK)),
                     concat=_rows(of(hooks.Z)), output=_rows(of(hooks.RESULT)), bias=bias)


def _io(calls: Calls, name: str) -> tuple[Tensor, Tensor]:
    """The stream entering and leaving a layer or block over all its calls, each joined along the sequence."""
    return _rows(calls.of(name, hooks.RESID_PRE)), _rows(calls.of(name, hooks.RESID_POST))


def _block_stream(calls: Calls, block: str) -> BlockStream:
    residual, output = _io(calls, block)
    return BlockStream(residual, _rows(calls.of(block, hooks.NORM_IN)), _rows(calls.of(block, hooks.NORM_OUT)), output)
