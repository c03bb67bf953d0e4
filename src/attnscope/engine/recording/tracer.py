"""The tracer of attnscope's own model: what one forward pass computed, chosen by flags.

`Keep` says what to keep: the softmaxed weights of every head (which the model returns when asked); the
internals of each attention call (q, k, v, scores, mask, the heads side by side, the output); the residual
stream (embeddings, positions, each layer's input and output, each residual block and its LayerNorm).
`tracing()` installs hooks for what the model does not return, under the model's lock and in eval mode, and
collects every call made from the thread that installed them into `Calls` (`install` alone puts them on a
model whose caller holds the lock already; record_attention uses its weights-only hooks on models built of
attnscope's attention). Nothing is recomputed: the values are the tensors the model's own modules received and
returned.

`trace()` runs one teacher-forced pass (with or without the KV cache) and returns one `Trace`, which
attribution reads (engine/attribution) and the inside view turns into plain numpy data (inside/traced.py).
"""
from __future__ import annotations

import math
import threading
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, Literal, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnscope.engine.recording.sharing import eval_mode
from attnscope.engine.recording.steps import join_steps
from attnscope.engine.recording.trace import EVERYTHING, WEIGHTS, BlockStream, Embedded, Internals, Keep, Layer, Sublayer, Trace
from attnscope.model.attention import MultiHeadAttention
from attnscope.model.blocks import Residual
from attnscope.model.transformer import DecoderCache, DecoderLayer, EncoderLayer, Transformer

Phase = Literal["encoder", "decoder"]


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
    """Hooks for what `keep` asks, in eval mode; yields the `Calls` they fill and removes the hooks on leaving (also
    after an error). A shared model is traced under its lock, which its caller holds (Translator.inference())."""
    calls = Calls()
    with eval_mode(model), ExitStack() as hooks:
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
    """The weights-only route (record_attention on a model built of attnscope's attention): append each call's
    weights, as `hook_pattern` sees them, to into[name]; nothing else."""
    def keep(_m: nn.Module, _args: Any, weights: Tensor) -> None:
        if threading.get_ident() == thread:  # detach only a tensor with a graph: a new tensor object costs
            into.setdefault(name, []).append(weights.detach() if weights.requires_grad else weights)
    hooks.callback(attn.hook_pattern.register_forward_hook(keep).remove)


def _on_output(hooks: ExitStack, calls: Calls, module: nn.Module, name: str,
               pick: Callable[[tuple[Any, ...], Any], Any] = lambda _args, out: out) -> None:
    """Keep pick(args, output) of every call of `module` under `name`."""
    hooks.callback(module.register_forward_hook(lambda _m, args, out: calls.keep(name, pick(args, out))).remove)


def _hook_internals(hooks: ExitStack, calls: Calls, name: str, attn: MultiHeadAttention) -> None:
    """q, keys, values and mask (the module's arguments) with its output and the position bias it was handed (T5's,
    None for other models and for cross-attention), the scores, the concatenated heads."""
    def call(_m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        calls.keep(f"{name}.call", (*args[:4], out[0], kwargs.get("bias", args[5] if len(args) > 5 else None)))
    hooks.callback(attn.register_forward_hook(call, with_kwargs=True).remove)
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
            _on_output(hooks, calls, m, f"{name}.io", lambda args, out: (args[0], out[0]))
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
        calls.phase = "decoder"
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


def _assemble(model: Transformer, calls: Calls, weights: dict[str, Tensor], keep: Keep, source_ids: tuple[int, ...],
              target_ids: tuple[int, ...], use_cache: bool, logits: Tensor) -> Trace:
    names = {m: name for name, m in model.named_modules()}

    def sublayer(attn: MultiHeadAttention, block: Residual, layer: int) -> Sublayer:
        phase: Phase = "encoder" if attn.kind == "encoder" else "decoder"
        name = names[attn]
        return Sublayer(attn.kind, layer, attn, block, weights.get(name),
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


def _mask(calls: list[tuple[Tensor, ...]]) -> Tensor | None:
    """The masks of every call as one (B, 1, Q, K) mask of the joined rows; a call's None allows each key it had.
    None when every call allowed every key (cross-attention to an unpadded source)."""
    n_keys = calls[-1][1].shape[2]
    if len(calls) == 1 or all(mask is None and keys.shape[2] == n_keys for _q, keys, _v, mask, *_ in calls):
        return calls[-1][3]
    rows = []
    for q, keys, _v, mask, *_ in calls:
        shape = (q.shape[0], 1, q.shape[2], keys.shape[2])
        allowed = torch.ones(shape, dtype=torch.bool, device=q.device) if mask is None else mask.expand(shape)
        rows.append(F.pad(allowed, (0, n_keys - keys.shape[2]), value=False))
    return torch.cat(rows, 2)


def _internals(calls: Calls, phase: Phase, name: str) -> Internals:
    each = calls.of(phase, f"{name}.call")  # (q, keys, values, mask, output, bias) per call
    bias = None if each[0][5] is None else join_steps([c[5] for c in each])  # keys a step had not: 0, masked anyway
    return Internals(queries=_rows([c[0] for c in each], 2), keys=each[-1][1], values=each[-1][2],  # the last call's
                     scores=join_steps(calls.of(phase, f"{name}.scores"), -math.inf), mask=_mask(each),  # keys: every one
                     concat=_rows(calls.of(phase, f"{name}.concat")), output=_rows([c[4] for c in each]), bias=bias)


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
