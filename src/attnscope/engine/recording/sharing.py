"""One model, many sessions: the lock every user of a shared model holds while running or hooking it, and eval
mode for the length of a call.

Who takes the lock: `Translator.inference()` around everything run through a translator, and the public entry
points that hook a model they are handed (record_attention, generate_with_attention, the logit lens, a float64
copy's read of the weights). Functions of a bare model (decoding, trace, saliency) take none: their caller holds
it. attnscope's own paths take it once; it stays re-entrant for users who nest one record_attention in another."""
from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from typing import Iterator, Sequence

from torch import nn

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
