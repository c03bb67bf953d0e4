"""The recorder: capture every attention head of one forward pass (or of a decoding loop).

Works on attnscope's own model (hooks on each attention module's `hook_pattern`) and on any
module built from `torch.nn.MultiheadAttention` (nn.Transformer, nn.TransformerEncoder,
hand-written encoder-decoders): there a pre-hook forces per-head weights and a forward hook
reads them. Hooks live only inside the context manager and are removed in `finally`.
"""
from __future__ import annotations

import threading
import warnings
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch import Tensor, nn

from attnscope.model.transformer import MultiHeadAttention

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

    @property
    def weights(self) -> dict[str, Tensor]:
        """One [B, H, Q, K] tensor per module: calls stacked along the query axis.

        Incremental decoding calls a module once per step with one query and a growing number
        of keys; the rows are right-padded with zeros (the causally masked keys) and stacked.
        """
        out = {}
        for name, tensors in self.calls.items():
            n_keys = max(t.shape[-1] for t in tensors)
            padded = [torch.nn.functional.pad(t, (0, n_keys - t.shape[-1])) for t in tensors]
            out[name] = torch.cat(padded, dim=2)
        return out

    def clear(self) -> None:
        self.calls.clear()


def attention_modules(module: nn.Module) -> dict[str, nn.Module]:
    """Every attention module in `module` (ours or nn.MultiheadAttention), by dotted name."""
    found = {name: m for name, m in module.named_modules()
             if isinstance(m, (MultiHeadAttention, nn.MultiheadAttention))}
    if not found:
        raise ValueError(f"{type(module).__name__} has no attention modules to record "
                         "(neither attnscope attention nor torch.nn.MultiheadAttention)")
    return found


_MHA_OPTIONAL_ARGS = ("key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal")


def _force_weights(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Pre-hook for nn.MultiheadAttention: ask for per-head weights, whatever the caller said."""
    named = dict(zip(_MHA_OPTIONAL_ARGS, args[3:]))  # after (query, key, value)
    return args[:3], {**named, **kwargs, "need_weights": True, "average_attn_weights": False}


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
def record_attention(module: nn.Module) -> Iterator[Recording]:
    """Record the attention weights of every head while the block runs.

    Only calls made from the recording thread are kept, and the model's lock is held
    throughout, so sessions sharing one model never see each other's weights. A module in
    training mode is switched to eval mode for the duration (dropout would distort the
    weights) and a note says so.
    """
    recording = Recording()
    me = threading.get_ident()
    handles: list[torch.utils.hooks.RemovableHandle] = []

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
                if isinstance(m, MultiHeadAttention):
                    handles.append(m.hook_pattern.register_forward_hook(
                        lambda _m, _i, out, name=name: keep(name, out)))
                else:
                    handles.append(m.register_forward_pre_hook(_force_weights, with_kwargs=True))
                    handles.append(m.register_forward_hook(
                        lambda _m, _i, out, name=name: keep(name, _per_head(out[1], _m))))
            yield recording
        finally:
            for handle in handles:
                handle.remove()


def _per_head(weights: Tensor, mha: nn.MultiheadAttention) -> Tensor:
    """nn.MultiheadAttention returns (B, H, Q, K), or (H, Q, K) for unbatched input."""
    if weights.dim() == 3:
        weights = weights.unsqueeze(0)
    if weights.shape[1] != mha.num_heads:
        raise RuntimeError(f"expected per-head weights with {mha.num_heads} heads, got shape {list(weights.shape)}")
    return weights
