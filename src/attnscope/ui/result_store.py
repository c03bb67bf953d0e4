"""Results kept for every session within a memory budget: least recently used first out, and remembered as dropped.

Each result is kept pickled, so its size is known to the byte and every caller unpickles a copy of its own (no
session can change another's result). Adding a result drops the least recently used ones until the store is within
its budget again, never the one just added (a result larger than the whole budget is kept until the next one
arrives). The keys of dropped results are remembered (the latest MAX_DROPPED), so the page can say why a result it
asks for again has to be computed again.
"""
from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Any, Hashable, Iterator

MAX_DROPPED = 4096  # dropped keys remembered: a few hundred KB of keys at most


class ResultStore:
    """Pickled results by key, at most `budget` bytes of them (but the latest), least recently used dropped first."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._items: OrderedDict[Hashable, bytes] = OrderedDict()
        self._dropped: OrderedDict[Hashable, None] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._computing: dict[Hashable, threading.Lock] = {}

    @property
    def size(self) -> int:
        """Bytes kept now."""
        return self._size

    def get(self, key: Hashable) -> tuple[bool, Any]:
        """(True, a copy of the result) when `key` is kept, else (False, None); a hit makes it the most recent."""
        with self._lock:
            blob = self._items.get(key)
            if blob is None:
                return False, None
            self._items.move_to_end(key)
        return True, pickle.loads(blob)

    def put(self, key: Hashable, value: Any) -> list[Hashable]:
        """Keep `value` under `key`; returns the keys dropped to stay within the budget, least recently used first."""
        blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._size -= len(self._items.pop(key, b""))
            self._items[key] = blob
            self._size += len(blob)
            self._dropped.pop(key, None)
            dropped = []
            while self._size > self.budget and len(self._items) > 1:
                old, old_blob = self._items.popitem(last=False)
                self._size -= len(old_blob)
                self._dropped[old] = None
                dropped.append(old)
            while len(self._dropped) > MAX_DROPPED:
                self._dropped.popitem(last=False)
        return dropped

    def was_dropped(self, key: Hashable) -> bool:
        """Whether `key`'s result was kept once and dropped for the budget (and has not been kept since)."""
        with self._lock:
            return key in self._dropped

    @contextmanager
    def computing(self, key: Hashable) -> Iterator[None]:
        """Held while `key`'s result is computed: a second session asking for it meanwhile waits, then finds it."""
        with self._lock:
            lock = self._computing.setdefault(key, threading.Lock())
        with lock:
            yield
        with self._lock:
            if self._computing.get(key) is lock and not lock.locked():
                del self._computing[key]
