"""The app server's heap, given back: glibc keeps what Python and torch free for reuse, so a page that built and
dropped large temporaries (Attribution's gradients and float64 copies: ~25 MB) would hold them as resident
memory for the server's lifetime. `release()` after every script run hands free pages back (malloc_trim);
`limit_arenas()` caps glibc's per-thread arenas (every Streamlit session runs its scripts in a thread of its
own, and each new arena keeps its own free memory). Measured in BENCHMARKS.md (capture overhead and memory).
Both do nothing where the C library is not glibc."""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
ARENAS = 2


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """glibc, or None elsewhere (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim, libc.mallopt  # noqa: B018 (glibc's own functions: absent from other C libraries)
    except (OSError, AttributeError):
        return None
    return libc


@functools.cache
def limit_arenas() -> None:
    """At most ARENAS malloc arenas from now on (once per process)."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, ARENAS)


def release() -> None:
    """Return the heap's free pages to the system (a few milliseconds)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
