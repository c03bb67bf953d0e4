"""Every intermediate of every attention sublayer, from one forward pass with hooks on the model's own modules.

`trace()` runs the model's own `encode` and `decode` (with or without the KV cache) once and keeps,
for each attention sublayer, what its modules received and returned: the projected q, k, v (the
arguments of the attention module), the scaled and masked scores (`hook_scores`), the softmax
weights (`hook_pattern`), the concatenated heads and the result of W_O (`out_proj`), and the
residual block around it with its LayerNorm. Nothing is recomputed here: a view that shows these
arrays shows what the model computed. Arrays are numpy float32 of batch item 0.
"""
from __future__ import annotations

import math
import threading
from collections import defaultdict
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from attnscope.engine.inside.trace_data import ForwardTrace, StreamInputs, SublayerTrace
from attnscope.engine.recording.capture import eval_mode, model_lock
from attnscope.model.transformer import DecoderCache, Transformer


class _Tap:
    """Hooks that append what named modules saw, per phase ("encoder"/"decoder"); removed by close().
    Only calls from the thread that made the tap are kept (as the recorder does)."""

    def __init__(self) -> None:
        self.phase = "encoder"
        self.seen: dict[str, list[Any]] = defaultdict(list)
        self.handles: list[torch.utils.hooks.RemovableHandle] = []
        self.thread = threading.get_ident()

    def keep(self, name: str, value: Any) -> None:
        if threading.get_ident() == self.thread:
            self.seen[f"{self.phase}:{name}"].append(value)

    def on_output(self, module: nn.Module, name: str, pick: Callable[[tuple, Any], Any] = lambda _a, out: out) -> None:
        self.handles.append(module.register_forward_hook(lambda _m, args, out: self.keep(name, pick(args, out))))

    def on_input(self, module: nn.Module, name: str) -> None:
        self.handles.append(module.register_forward_pre_hook(lambda _m, args: self.keep(name, args)))

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _tap_model(model: Transformer, tap: _Tap) -> None:
    """Hook the embeddings, positions, every attention sublayer and every decoder layer's output."""
    tap.on_output(model.src_embed, "src_embed")
    if model.tgt_embed is not model.src_embed:
        tap.on_output(model.tgt_embed, "tgt_embed")
    tap.on_output(model.positions, "positions")
    tap.on_output(model.embed_dropout, "embedded")
    tap.on_output(model.encoder_norm, "memory")
    for i, layer in enumerate(model.encoder):
        _tap_sublayer(tap, f"encoder.{i}", layer.self_attn, layer.attn_block)
    for i, layer in enumerate(model.decoder):
        _tap_sublayer(tap, f"decoder.{i}", layer.self_attn, layer.self_block)
        _tap_sublayer(tap, f"cross.{i}", layer.cross_attn, layer.cross_block)
        tap.on_output(layer, f"layer_out.{i}")


def _tap_sublayer(tap: _Tap, name: str, attn: nn.Module, block: nn.Module) -> None:
    tap.on_input(attn, f"{name}.qkv")  # forward(q, keys, values, mask)
    tap.on_output(attn.hook_scores, f"{name}.scores")
    tap.on_output(attn.hook_pattern, f"{name}.weights")
    tap.on_output(attn.out_proj, f"{name}.concat", lambda args, _out: args[0])
    tap.on_output(attn.out_proj, f"{name}.output")
    tap.on_output(block, f"{name}.residual", lambda args, _out: args[0])
    tap.on_output(block, f"{name}.block_output")
    tap.on_output(block.norm, f"{name}.norm_input", lambda args, _out: args[0])
    tap.on_output(block.norm, f"{name}.norm_output")


@torch.no_grad()
def trace(model: Transformer, source_ids: Sequence[int], target_ids: Sequence[int], *, use_cache: bool = True) -> ForwardTrace:
    """Run the model once on a source and a target prefix (<bos> y1 .. y_t) and keep every intermediate.

    With `use_cache`, the decoder runs as decoding does: one position per step, keys and values
    from the KV cache; without it, all target positions in one pass under the causal mask.
    """
    device = next(model.parameters()).device
    src = torch.tensor([list(source_ids)], dtype=torch.long, device=device)
    tgt = torch.tensor([list(target_ids)], dtype=torch.long, device=device)
    tap = _Tap()
    with model_lock(model), eval_mode(model):
        _tap_model(model, tap)
        try:
            memory, src_mask = model.encode(src)
            tap.phase = "decoder"
            if use_cache:
                cache = DecoderCache.empty(len(model.decoder))
                logits = torch.cat([model.decode(tgt[:, t:t + 1], memory, src_mask, cache) for t in range(tgt.shape[1])], 1)
            else:
                logits = model.decode(tgt, memory, src_mask)  # (1, T, V)
        finally:
            tap.close()
    return _assemble(model, tap.seen, tuple(source_ids), tuple(target_ids), use_cache, _np(logits[0]))


def _np(t: Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _rows(calls: list[Tensor], axis: int) -> np.ndarray:
    """Batch item 0 of each call, joined along the sequence `axis` (one call per step when decoding with a cache)."""
    return np.concatenate([_np(c[0]) for c in calls], axis=axis)


def _square(calls: list[Tensor], fill: float) -> np.ndarray:
    """(H, Q, K) rows of every call, right-padded to the last call's keys: a key a cached step had not yet
    computed is a future position, so its score is -inf and its weight 0, as under the causal mask."""
    n_keys = calls[-1].shape[-1]
    padded = [torch.nn.functional.pad(c[0], (0, n_keys - c.shape[-1]), value=fill) for c in calls]
    return _np(torch.cat(padded, dim=1))


def _assemble(model: Transformer, seen: dict[str, list[Any]], source_ids: tuple[int, ...], target_ids: tuple[int, ...],
              use_cache: bool, logits: np.ndarray) -> ForwardTrace:
    sublayers = {}
    for name, attn in model.attention_modules().items():
        kind = attn.kind
        layer = int(name.split(".")[1])
        sublayers[(kind, layer)] = _sublayer(seen, f"{'encoder' if kind == 'encoder' else 'decoder'}:{kind}.{layer}", attn)
    target_embed = "decoder:tgt_embed" if "decoder:tgt_embed" in seen else "decoder:src_embed"
    return ForwardTrace(
        source_ids, target_ids, model.config.norm, use_cache,
        _inputs(seen, "encoder:src_embed", "encoder", model), _inputs(seen, target_embed, "decoder", model),
        _np(seen["encoder:memory"][0][0]), sublayers,
        np.stack([_rows(seen[f"decoder:layer_out.{i}"], 0) for i in range(len(model.decoder))]), logits)


def _inputs(seen: dict[str, list[Any]], embed: str, phase: str, model: Transformer) -> StreamInputs:
    position = np.concatenate([_np(p) for p in seen[f"{phase}:positions"]], axis=0)  # (N, D), one call per step
    scale = math.sqrt(model.config.d_model) if model.config.embed_scale else 1.0  # as Transformer._embed applies it
    return StreamInputs(_rows(seen[embed], 0), scale, position, _rows(seen[f"{phase}:embedded"], 0))


def _sublayer(seen: dict[str, list[Any]], key: str, attn: nn.Module) -> SublayerTrace:
    calls = seen[f"{key}.qkv"]
    q = np.concatenate([_np(args[0][0]) for args in calls], axis=1)  # (H, Q, dh)
    k, v = _np(calls[-1][1][0]), _np(calls[-1][2][0])  # the last call's keys cover every position (cache or not)
    return SublayerTrace(
        q=q, k=k, v=v, scores=_square(seen[f"{key}.scores"], -math.inf), weights=_square(seen[f"{key}.weights"], 0.0),
        concat=_rows(seen[f"{key}.concat"], 0), output=_rows(seen[f"{key}.output"], 0),
        w_o=_np(attn.out_proj.weight), b_o=_np(attn.out_proj.bias),
        residual=_rows(seen[f"{key}.residual"], 0), norm_input=_rows(seen[f"{key}.norm_input"], 0),
        norm_output=_rows(seen[f"{key}.norm_output"], 0), block_output=_rows(seen[f"{key}.block_output"], 0))
