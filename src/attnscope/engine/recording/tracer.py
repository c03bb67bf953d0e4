"""The tracer of attnscope's own model: hooks that keep what one forward pass computed, chosen by flags.

`Keep` says what to keep: the softmaxed weights of every head; the internals of each attention call (q, k, v,
scores, mask, the heads side by side, the output); the residual stream (embeddings, positions, each layer's
input and output, each residual block and its LayerNorm). `tracing()` installs exactly those hooks, under the
model's lock and in eval mode, and collects every call made from the thread that installed them into `Calls`
(`install` alone puts them on a model whose caller holds the lock already).
Nothing is recomputed: the values are the tensors the model's own modules received and returned.

- capture (recording/capture.py) runs the weights-only mode over a whole decoding loop: each attention module's
  sink appends its weights to the recording, the cheapest form (it runs on every translation);
- `trace()` runs one teacher-forced pass (with or without the KV cache) and returns one `Trace`, which
  attribution reads (engine/attribution) and the inside view turns into plain numpy data (inside/traced.py).
"""
from __future__ import annotations

import math
import threading
import weakref
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from dataclasses import astuple, dataclass
from typing import Any, Callable, Iterator, Literal, Sequence, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnscope.model.kinds import Kind
from attnscope.model.transformer import DecoderCache, DecoderLayer, EncoderLayer, MultiHeadAttention, Residual, Sink, Transformer

Phase = Literal["encoder", "decoder"]
T = TypeVar("T")

_LOCKS: "weakref.WeakKeyDictionary[nn.Module, threading.RLock]" = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def model_lock(module: nn.Module) -> threading.RLock:
    """The lock every user of a shared model holds while running or hooking it."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(module)
        if lock is None:
            lock = _LOCKS[module] = threading.RLock()
        return lock


@contextmanager
def eval_mode(module: nn.Module, modules: Sequence[nn.Module] | None = None) -> Iterator[bool]:
    """Run with every submodule in eval mode, then give each its own mode back; yields whether
    any was training. Touches only the modules that were training (cheap on every translation).
    `modules`: module.modules() when the caller has walked them already."""
    training = [m for m in (module.modules() if modules is None else modules) if m.training]
    for m in training:
        m.training = False
    try:
        yield bool(training)
    finally:
        for m in training:
            m.training = True


@dataclass(frozen=True)
class Keep:
    """What a trace keeps: `weights` the softmaxed weights (B, H, Q, K) of every head; `internals` each attention
    call's q, k, v, scores, mask, concatenated heads and output; `stream` the residual stream (embeddings,
    positions, each layer's input and output, each attention block's input, LayerNorm input and output, output)."""

    weights: bool = True
    internals: bool = False
    stream: bool = False

    def covers(self, other: "Keep") -> bool:
        """Whether a trace that kept this keeps everything `other` asks for."""
        return all(mine or not theirs for mine, theirs in zip(astuple(self), astuple(other)))


WEIGHTS = Keep()
EVERYTHING = Keep(weights=True, internals=True, stream=True)


class Calls:
    """What the hooked modules returned, call by call, from the thread that made this (other threads' calls
    are dropped: sessions share one model). `weights` by attention module name (capture hands its recording's
    dict); everything else under (phase, name), the phase telling the encoder's calls of a shared module
    (embeddings, positions) from the decoder's."""

    def __init__(self, weights: dict[str, list[Tensor]] | None = None) -> None:
        self.thread = threading.get_ident()
        self.phase: Phase = "encoder"
        self.weights: dict[str, list[Tensor]] = {} if weights is None else weights
        self.seen: dict[tuple[Phase, str], list[Any]] = defaultdict(list)

    def keep(self, name: str, value: Any) -> None:
        if threading.get_ident() == self.thread:
            self.seen[(self.phase, name)].append(value)

    def of(self, phase: Phase, name: str) -> list[Any]:
        return self.seen[(phase, name)]


@contextmanager
def tracing(model: nn.Module, keep: Keep = WEIGHTS) -> Iterator[Calls]:
    """Hooks for what `keep` asks, under the model's lock and in eval mode; yields the `Calls` they fill and
    removes the hooks on leaving (also after an error)."""
    calls = Calls()
    with model_lock(model), eval_mode(model), ExitStack() as hooks:
        install(hooks, model, keep, calls, {name: m for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)})
        yield calls


def install(hooks: ExitStack, model: nn.Module, keep: Keep, calls: Calls, attention: dict[str, MultiHeadAttention]) -> None:
    """The hooks of `tracing`, each removed by `hooks`, for a caller that holds the model's lock and runs it in
    eval mode already (capture, before every translation, with its attention modules found). Weights and
    internals work on any module built of attnscope's attention; the stream needs a `Transformer`."""
    if keep.stream and not isinstance(model, Transformer):
        raise TypeError(f"the residual stream is traced on attnscope's Transformer, not {type(model).__name__}")
    if keep.weights:
        for name, m in attention.items():
            _keep_weights(hooks, name, m, calls.weights, calls.thread)
    if keep.internals:
        for name, m in attention.items():
            _hook_internals(hooks, calls, name, m)
    if keep.stream:
        _hook_stream(hooks, calls, model)


def _keep_weights(hooks: ExitStack, name: str, attn: MultiHeadAttention, into: dict[str, list[Tensor]], thread: int) -> None:
    """The weights-only route: append each call's weights to into[name], nothing else (capture runs it 8 times a
    decoding step). Through the module's sink while it is free (no module call, see model.transformer.Sink), else
    (a trace nested in another of the same model) through a hook on `hook_pattern`, which sees the same tensors."""
    if attn.sink is None:
        attn.sink = Sink(thread, into, name)
        hooks.callback(setattr, attn, "sink", None)
        return

    def keep(_m: nn.Module, _args: Any, weights: Tensor) -> None:
        if threading.get_ident() == thread:  # detach only a tensor with a graph: a new tensor object costs
            into.setdefault(name, []).append(weights.detach() if weights.requires_grad else weights)
    hooks.callback(attn.hook_pattern.register_forward_hook(keep).remove)


def _on_output(hooks: ExitStack, calls: Calls, module: nn.Module, name: str,
               pick: Callable[[tuple[Any, ...], Any], Any] = lambda _args, out: out) -> None:
    """Keep pick(args, output) of every call of `module` under `name`."""
    hooks.callback(module.register_forward_hook(lambda _m, args, out: calls.keep(name, pick(args, out))).remove)


def _hook_internals(hooks: ExitStack, calls: Calls, name: str, attn: MultiHeadAttention) -> None:
    """q, keys, values and mask (the module's arguments) with its output, the scores, the concatenated heads."""
    _on_output(hooks, calls, attn, f"{name}.call", lambda args, out: (*args, out))
    _on_output(hooks, calls, attn.hook_scores, f"{name}.scores")
    _on_output(hooks, calls, attn.out_proj, f"{name}.concat", lambda args, _out: args[0])


def _hook_stream(hooks: ExitStack, calls: Calls, model: Transformer) -> None:
    """Embeddings, positions, the sum the first layer reads, the encoder's output, every layer and attention block."""
    for table in {id(t): t for t in (model.src_embed, model.tgt_embed)}.values():  # one module when shared
        _on_output(hooks, calls, table, "embed")
    _on_output(hooks, calls, model.positions, "positions")
    _on_output(hooks, calls, model.embed_dropout, "embedded")
    _on_output(hooks, calls, model.encoder_norm, "memory")
    for name, m in model.named_modules():
        if isinstance(m, (EncoderLayer, DecoderLayer)):
            _on_output(hooks, calls, m, f"{name}.io", _in_out)
            for block_name, block in _attention_blocks(m).items():
                _on_output(hooks, calls, block, f"{name}.{block_name}.io", _in_out)
                _on_output(hooks, calls, block.norm, f"{name}.{block_name}.norm", _in_out)


def _attention_blocks(layer: EncoderLayer | DecoderLayer) -> dict[str, Residual]:
    """The residual blocks around a layer's attention (not its feed-forward block), by attribute name."""
    if isinstance(layer, EncoderLayer):
        return {"attn_block": layer.attn_block}
    return {"self_block": layer.self_block, "cross_block": layer.cross_block}


def _in_out(args: tuple[Any, ...], out: Tensor) -> tuple[Tensor, Tensor]:
    return args[0], out


@dataclass(frozen=True)
class Internals:
    """What one attention sublayer computed between its projections and its output (Keep.internals)."""

    queries: Tensor  # (B, H, Q, dh)
    keys: Tensor  # (B, H, K, dh)
    values: Tensor  # (B, H, K, dh)
    scores: Tensor  # (B, H, Q, K) q·k/√dh, -inf where masked
    mask: Tensor | None  # True where allowed, broadcastable to (B, H, Q, K); None: every key everywhere
    concat: Tensor  # (B, Q, D) the heads' outputs side by side: the input of W_O
    output: Tensor  # (B, Q, D) after the output projection


@dataclass(frozen=True)
class BlockStream:
    """The residual block around one attention sublayer (Keep.stream)."""

    residual: Tensor  # (B, Q, D) the block's input x
    norm_input: Tensor  # (B, Q, D) what its LayerNorm read
    norm_output: Tensor  # (B, Q, D) what the LayerNorm returned
    output: Tensor  # (B, Q, D) post-LN: LN(x + attn); pre-LN: x + attn(LN(x))


@dataclass(frozen=True)
class Sublayer:
    """One attention sublayer over the whole pass; with the KV cache its steps are joined along the queries
    (keys a step had not computed yet are future positions: score -inf, weight 0, mask False)."""

    kind: Kind
    layer: int
    module: MultiHeadAttention
    block: Residual
    weights: Tensor | None  # (B, H, Q, K) after the softmax (Keep.weights)
    internals: Internals | None
    stream: BlockStream | None


@dataclass(frozen=True)
class Layer:
    """One encoder or decoder layer: its input and output (Keep.stream) and its attention sublayers."""

    module: EncoderLayer | DecoderLayer
    inputs: Tensor | None  # (B, N, D)
    output: Tensor | None  # (B, N, D)
    self_attn: Sublayer
    cross_attn: Sublayer | None  # decoder layers only


@dataclass(frozen=True)
class Embedded:
    """What a stack's first layer reads (Keep.stream): token embedding × scale + positional encoding."""

    token_embedding: Tensor  # (B, N, D) rows of the embedding table, before scaling
    scale: float  # √d_model, or 1 for a model that does not scale its embeddings (config.embed_scale)
    position: Tensor  # (N, D) positional encodings of positions 0..N-1
    total: Tensor  # (B, N, D) the sum the first layer reads (embedding dropout is off in eval)


@dataclass(frozen=True)
class Trace:
    """One teacher-forced pass of a source and a decoder input (<bos> y1 .. y_t) through the whole model."""

    source_ids: tuple[int, ...]
    target_ids: tuple[int, ...]  # the decoder's inputs
    keep: Keep
    use_cache: bool
    encoder: tuple[Layer, ...]
    decoder: tuple[Layer, ...]
    logits: Tensor  # (B, T, V) next-token logits at every target position
    source: Embedded | None  # Keep.stream
    target: Embedded | None
    memory: Tensor | None  # (B, S, D) the encoder's output (after its final norm, if any), Keep.stream

    def sublayer(self, kind: Kind, layer: int) -> Sublayer:
        return self.sublayers(kind)[layer]

    def sublayers(self, kind: Kind) -> list[Sublayer]:
        """The attention sublayers of one kind, in layer order."""
        if kind == "encoder":
            return [layer.self_attn for layer in self.encoder]
        if kind == "decoder":
            return [layer.self_attn for layer in self.decoder]
        return [layer.cross_attn for layer in self.decoder if layer.cross_attn is not None]

    def require(self, keep: Keep) -> "Trace":
        """This trace, if it kept what `keep` asks for (else a ValueError that says what to trace with)."""
        if not self.keep.covers(keep):
            raise ValueError(f"this trace kept {self.keep}; the caller needs {keep}")
        return self


def kept(value: T | None) -> T:
    """A part of a trace that its flags kept; a ValueError for one they left out (`Trace.require` says which)."""
    if value is None:
        raise ValueError("this part was not kept by the trace's flags (Keep)")
    return value


def decoder_inputs(target_ids: Sequence[int], bos_id: int) -> list[int]:
    """<bos> y1 .. y_{T-1}: what the decoder reads while choosing y1 .. yT (bos_id: the model config's)."""
    return [bos_id, *list(target_ids)[:-1]]


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
    with tracing(model, keep) as calls:
        memory, src_mask = model.encode(src)
        calls.phase = "decoder"
        if use_cache:
            cache = DecoderCache.empty(len(model.decoder))
            logits = torch.cat([model.decode(tgt[:, t:t + 1], memory, src_mask, cache) for t in range(tgt.shape[1])], 1)
        else:
            logits = model.decode(tgt, memory, src_mask)
    return _assemble(model, calls, keep, tuple(source_ids), tuple(target_ids), use_cache, logits)


def _assemble(model: Transformer, calls: Calls, keep: Keep, source_ids: tuple[int, ...], target_ids: tuple[int, ...],
              use_cache: bool, logits: Tensor) -> Trace:
    names = {m: name for name, m in model.named_modules()}

    def sublayer(attn: MultiHeadAttention, block: Residual, layer: int) -> Sublayer:
        phase: Phase = "encoder" if attn.kind == "encoder" else "decoder"
        name = names[attn]
        return Sublayer(attn.kind, layer, attn, block, _square(calls.weights[name], 0.0) if keep.weights else None,
                        _internals(calls, phase, name) if keep.internals else None,
                        _block_stream(calls, phase, names[block]) if keep.stream else None)

    def layer(m: EncoderLayer | DecoderLayer, i: int) -> Layer:
        phase: Phase = "encoder" if isinstance(m, EncoderLayer) else "decoder"
        inputs, output = _io(calls.of(phase, f"{names[m]}.io")) if keep.stream else (None, None)
        if isinstance(m, EncoderLayer):
            return Layer(m, inputs, output, sublayer(m.self_attn, m.attn_block, i), None)
        return Layer(m, inputs, output, sublayer(m.self_attn, m.self_block, i), sublayer(m.cross_attn, m.cross_block, i))

    stream = keep.stream
    return Trace(source_ids, target_ids, keep, use_cache,
                 tuple(layer(m, i) for i, m in enumerate(model.encoder)), tuple(layer(m, i) for i, m in enumerate(model.decoder)),
                 logits, _embedded(calls, "encoder", model) if stream else None,
                 _embedded(calls, "decoder", model) if stream else None,
                 calls.of("encoder", "memory")[0] if stream else None)


def _rows(calls: list[Tensor], dim: int = 1) -> Tensor:
    """Every call joined along the sequence `dim` (one call per step when decoding with a cache)."""
    return calls[0] if len(calls) == 1 else torch.cat(calls, dim)


def _square(calls: list[Tensor], fill: float) -> Tensor:
    """(B, H, Q, K) rows of every call, right-padded to the last call's keys: a key a cached step had not yet
    computed is a future position, so its score is -inf and its weight 0, as under the causal mask."""
    n_keys = calls[-1].shape[-1]
    return _rows([F.pad(c, (0, n_keys - c.shape[-1]), value=fill) for c in calls], 2)


def _mask(calls: list[tuple[Tensor, ...]]) -> Tensor | None:
    """The masks of every call as one (B, 1, Q, K) mask of the joined rows; a call's None allows each key it had.
    None when every call allowed every key (cross-attention to an unpadded source)."""
    n_keys = calls[-1][1].shape[2]
    if len(calls) == 1 or all(mask is None and keys.shape[2] == n_keys for _q, keys, _v, mask, _out in calls):
        return calls[-1][3]
    rows = []
    for q, keys, _v, mask, _out in calls:
        shape = (q.shape[0], 1, q.shape[2], keys.shape[2])
        allowed = torch.ones(shape, dtype=torch.bool, device=q.device) if mask is None else mask.expand(shape)
        rows.append(F.pad(allowed, (0, n_keys - keys.shape[2]), value=False))
    return torch.cat(rows, 2)


def _internals(calls: Calls, phase: Phase, name: str) -> Internals:
    each = calls.of(phase, f"{name}.call")  # (q, keys, values, mask, output) per call
    return Internals(queries=_rows([c[0] for c in each], 2), keys=each[-1][1], values=each[-1][2],  # the last call's
                     scores=_square(calls.of(phase, f"{name}.scores"), -math.inf), mask=_mask(each),  # keys: every one
                     concat=_rows(calls.of(phase, f"{name}.concat")), output=_rows([c[4] for c in each]))


def _io(calls: list[tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
    """(input, output) of a module's calls, each joined along the sequence."""
    return _rows([c[0] for c in calls]), _rows([c[1] for c in calls])


def _block_stream(calls: Calls, phase: Phase, block: str) -> BlockStream:
    residual, output = _io(calls.of(phase, f"{block}.io"))
    norm_input, norm_output = _io(calls.of(phase, f"{block}.norm"))
    return BlockStream(residual, norm_input, norm_output, output)


def _embedded(calls: Calls, phase: Phase, model: Transformer) -> Embedded:
    scale = math.sqrt(model.config.d_model) if model.config.embed_scale else 1.0  # as Transformer._embed applies it
    return Embedded(_rows(calls.of(phase, "embed")), scale, _rows(calls.of(phase, "positions"), 0),
                    _rows(calls.of(phase, "embedded")))
