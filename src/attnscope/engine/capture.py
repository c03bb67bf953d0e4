"""The recorder: capture every attention head of one forward pass (or of a decoding loop).

Works on attnscope's own model (hooks on each attention module's `hook_pattern`), on any
module built from `torch.nn.MultiheadAttention` (nn.Transformer, nn.TransformerEncoder,
hand-written encoder-decoders: a pre-hook asks for per-head weights and a forward hook reads
them, then hands the caller exactly what it asked for: None, head-averaged or per-head), and on
modules that keep their last weights on an attribute (the Annotated Transformer's `self.attn`).
Hooks live only inside the context manager and are removed in `finally`.

Every call is kept separately (`Recording.calls`); `Recording.weights` joins a module's calls
into one matrix, whether the loop fed one new position per step (KV cache) or re-ran the whole
prefix each step (one row per step is kept: the rows a re-run recomputes are checked to be the
same). Each module gets a kind (encoder self, decoder self, cross: model/kinds.py), from attnscope's own
modules or from its name; `record_attention(..., kinds={...})` overrides.
"""
from __future__ import annotations

import threading
import warnings
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from attnscope.engine.record import AttentionRecord, RecordError
from attnscope.model.kinds import KINDS, Kind
from attnscope.model.transformer import MultiHeadAttention

# Attributes on which attention modules written like the Annotated Transformer's keep their last weights.
WEIGHT_ATTRIBUTES = ("attn", "attn_weights", "attention_weights", "attn_probs", "attention_probs")
CROSS_NAMES = ("cross", "src_attn", "multihead_attn", "encoder_attn", "enc_dec", "encdec", "context_attn", "inter_attn")

_LOCKS: "weakref.WeakKeyDictionary[nn.Module, threading.RLock]" = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()
_FASTPATH_GUARD = threading.Lock()
_fastpath_users = 0
_fastpath_before = True  # the setting found when the first recording started, restored by the last


def model_lock(module: nn.Module) -> threading.RLock:
    """The lock every user of a shared model holds while running or hooking it."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(module)
        if lock is None:
            lock = _LOCKS[module] = threading.RLock()
        return lock


@dataclass
class Recording:
    """Weights captured per attention module name, one tensor per call, each [B, H, Q, K]."""

    calls: dict[str, list[Tensor]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # e.g. "switched to eval mode"
    kinds: dict[str, Kind | None] = field(default_factory=dict)  # None: the recorder could not tell

    @property
    def weights(self) -> dict[str, Tensor]:
        """One [B, H, Q, K] tensor per module: its calls joined along the query axis.

        Incremental decoding calls a module once per step with one query and a growing number
        of keys; the rows are right-padded with zeros (the causally masked keys) and stacked.
        A loop that re-runs the whole prefix each step contributes the new (last) row of each call.
        """
        out = {}
        for name, tensors in self.calls.items():
            if recomputes_prefix(tensors):
                tensors = [tensors[0], *(t[:, :, -1:] for t in tensors[1:])]
            n_keys = max(t.shape[-1] for t in tensors)
            padded = [torch.nn.functional.pad(t, (0, n_keys - t.shape[-1])) for t in tensors]
            out[name] = torch.cat(padded, dim=2)
        return out

    def clear(self) -> None:
        self.calls.clear()

    def by_kind(self, kinds: dict[str, Kind] | None = None) -> dict[Kind, list[str]]:
        """Recorded module names per kind, in call order; `kinds` overrides what was inferred."""
        known = {**self.kinds, **(kinds or {})}
        unknown = [n for n in self.calls if known.get(n) not in KINDS]
        if unknown:
            raise RecordError(f"cannot tell the kind of {', '.join(unknown)}: pass kinds={{'{unknown[0]}': "
                              "'encoder' | 'decoder' | 'cross', ...}")
        return {kind: [n for n in self.calls if known[n] == kind] for kind in KINDS}

    def to_record(self, source_tokens: Sequence[str], target_tokens: Sequence[str], *, item: int = 0,
                  kinds: dict[str, Kind] | None = None) -> AttentionRecord:
        """An AttentionRecord of batch item `item`, for every figure builder and the app.

        `target_tokens` are the decoder's inputs (<bos> y1 .. y_{n-1}), one per decoder query.
        """
        groups, weights = self.by_kind(kinds), self.weights
        missing = [k for k in KINDS if not groups[k]]
        if missing:
            raise RecordError(f"nothing was recorded for {', '.join(missing)} attention; recorded: "
                              f"{', '.join(f'{n} ({self.kinds.get(n)})' for n in self.calls) or 'nothing'}")
        stack = lambda kind: np.stack([weights[n][item].float().cpu().numpy() for n in groups[kind]])  # noqa: E731
        return AttentionRecord(tuple(source_tokens), tuple(target_tokens), stack("encoder"), stack("decoder"),
                               stack("cross"))


def recomputes_prefix(tensors: Sequence[Tensor]) -> bool:
    """Whether successive calls re-ran a growing prefix: one more query each time, the earlier rows unchanged."""
    if len(tensors) < 2:
        return False
    for prev, cur in zip(tensors, tensors[1:]):
        if cur.shape[:2] != prev.shape[:2] or cur.shape[2] != prev.shape[2] + 1 or cur.shape[3] < prev.shape[3]:
            return False
        earlier = cur[:, :, :-1]  # rows the previous call computed already; keys it did not have are masked (0)
        if not torch.allclose(earlier[..., : prev.shape[3]], prev, atol=1e-5) or bool(earlier[..., prev.shape[3]:].any()):
            return False
    return True


def infer_kind(name: str) -> Kind | None:
    """A module's kind from its dotted name (cross-attention names first, then an enc*/dec* component)."""
    parts = name.lower().split(".")
    if any(c in part for part in parts for c in CROSS_NAMES):
        return "cross"
    for part in reversed(parts):
        if part.startswith("dec"):
            return "decoder"
        if part.startswith("enc"):
            return "encoder"
    return None


def weight_attribute(module: nn.Module) -> str | None:
    """The attribute on which a module keeps its last attention weights (None or a tensor until then)."""
    if isinstance(module, (MultiHeadAttention, nn.MultiheadAttention)):
        return None
    for attr in WEIGHT_ATTRIBUTES:
        if attr in module.__dict__ and (module.__dict__[attr] is None or isinstance(module.__dict__[attr], Tensor)):
            return attr
    return None


def attention_modules(module: nn.Module) -> dict[str, nn.Module]:
    """Every attention module in `module` (ours, nn.MultiheadAttention, or one keeping weights on .attn), by name."""
    found = {name: m for name, m in module.named_modules()
             if isinstance(m, (MultiHeadAttention, nn.MultiheadAttention)) or weight_attribute(m)}
    if not found:
        raise ValueError(f"{type(module).__name__} has no attention modules to record (neither attnscope attention, "
                         "torch.nn.MultiheadAttention, nor a module keeping its weights on .attn)")
    return found


_MHA_OPTIONAL_ARGS = ("key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal")


class _Asked:
    """What each caller of an nn.MultiheadAttention asked for, so it gets exactly that back."""

    def __init__(self) -> None:
        self.pending: dict[tuple[int, int], list[tuple[bool, bool]]] = {}

    def force(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Pre-hook: remember (need_weights, average_attn_weights), then ask for per-head weights."""
        named = {**dict(zip(_MHA_OPTIONAL_ARGS, args[3:])), **kwargs}  # after (query, key, value)
        wish = (bool(named.get("need_weights", True)), bool(named.get("average_attn_weights", True)))
        self.pending.setdefault((threading.get_ident(), id(module)), []).append(wish)
        return args[:3], {**named, "need_weights": True, "average_attn_weights": False}

    def give_back(self, module: nn.Module, output: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor | None]:
        """What the caller would have received: no weights, head-averaged, or per-head."""
        need, average = self.pending[(threading.get_ident(), id(module))].pop()
        out, weights = output
        if not need:
            return out, None
        return (out, weights.mean(dim=-3)) if average else (out, weights)


@contextmanager
def _fastpath_disabled() -> Iterator[None]:
    """Fused encoder kernels and nested tensors skip attention hooks (and trim padded maps)."""
    global _fastpath_users, _fastpath_before
    with _FASTPATH_GUARD:
        if _fastpath_users == 0:
            _fastpath_before = torch.backends.mha.get_fastpath_enabled()
        _fastpath_users += 1
        torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        with _FASTPATH_GUARD:
            _fastpath_users -= 1
            if _fastpath_users == 0:
                torch.backends.mha.set_fastpath_enabled(_fastpath_before)


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[bool]:
    """Run with every submodule in eval mode, then give each its own mode back; yields whether
    any was training. Touches only the modules that were training (cheap on every translation)."""
    training = [m for m in module.modules() if m.training]
    for m in training:
        m.training = False
    try:
        yield bool(training)
    finally:
        for m in training:
            m.training = True


@contextmanager
def record_attention(module: nn.Module, kinds: dict[str, Kind] | None = None) -> Iterator[Recording]:
    """Record the attention weights of every head while the block runs.

    Only calls made from the recording thread are kept, and the model's lock is held
    throughout, so sessions sharing one model never see each other's weights. A module in
    training mode is switched to eval mode for the duration (dropout would distort the
    weights) and a note says so. What the caller's code receives is unchanged (an
    nn.MultiheadAttention must compute its weights to be recorded, so its output may differ
    from an unrecorded call in the last float bits, as with need_weights=True).
    `kinds` names the kind (encoder, decoder, cross) of modules whose names do not tell it.
    """
    recording = Recording()
    me = threading.get_ident()
    handles: list[torch.utils.hooks.RemovableHandle] = []
    asked = _Asked()

    def keep(name: str, weights: Tensor) -> None:
        if threading.get_ident() == me:
            recording.calls.setdefault(name, []).append(weights.detach())

    with model_lock(module), _fastpath_disabled(), eval_mode(module) as was_training:
        if was_training:
            note = "the model was in training mode; switched to eval mode while recording (dropout would distort the weights)"
            recording.notes.append(note)
            warnings.warn(note, stacklevel=3)
        try:
            for name, m in attention_modules(module).items():
                recording.kinds[name] = (kinds or {}).get(name) or (m.kind if isinstance(m, MultiHeadAttention)
                                                                    else infer_kind(name))
                handles.extend(_hooks(name, m, keep, asked))
            yield recording
        finally:
            for handle in handles:
                handle.remove()


def _hooks(name: str, m: nn.Module, keep: Any, asked: _Asked) -> list[torch.utils.hooks.RemovableHandle]:
    """The hooks that read one attention module's weights (and, for nn.MultiheadAttention, restore its output)."""
    if isinstance(m, MultiHeadAttention):
        return [m.hook_pattern.register_forward_hook(lambda _m, _i, out: keep(name, out))]
    if isinstance(m, nn.MultiheadAttention):
        def read(mha: nn.Module, _args: Any, output: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor | None]:
            keep(name, _per_head(output[1], mha))
            return asked.give_back(mha, output)
        return [m.register_forward_pre_hook(asked.force, with_kwargs=True), m.register_forward_hook(read)]
    attr = weight_attribute(m)

    def read_attribute(module: nn.Module, _args: Any, _output: Any) -> None:
        weights = getattr(module, attr)
        if isinstance(weights, Tensor):
            keep(name, weights if weights.dim() == 4 else weights.unsqueeze(0))
    return [m.register_forward_hook(read_attribute)]


def _per_head(weights: Tensor, mha: nn.MultiheadAttention) -> Tensor:
    """nn.MultiheadAttention returns (B, H, Q, K), or (H, Q, K) for unbatched input."""
    if weights.dim() == 3:
        weights = weights.unsqueeze(0)
    if weights.shape[1] != mha.num_heads:
        raise RuntimeError(f"expected per-head weights with {mha.num_heads} heads, got shape {list(weights.shape)}")
    return weights
