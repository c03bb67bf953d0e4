"""One cache for results computed from a query (a translation, a forced branch, weighted value norms...).

Results are `st.cache_data`: shared by every session (so many users on one model translate a sentence
once), each caller getting its own copy. Entries are named `(kind, query.key, *extra)`, so results of
different kinds never collide, and bounded in number: the least recently used go first.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Hashable, TypeVar

import streamlit as st

from attnscope.ui.query import Query

T = TypeVar("T")
MAX_ENTRIES = 288  # as many as the five caches this one replaced held together (4 × 64 + 32)

ResultKey = tuple[Hashable, ...]  # names one result: (kind, query key, extra arguments...)


def result_key(kind: str, query: Query, *extra: Hashable) -> ResultKey:
    """The name of the `kind` result of `query` (with `extra` arguments, e.g. a forced prefix)."""
    return (kind, query.key, *extra)


@st.cache_data(max_entries=MAX_ENTRIES, show_spinner=False)
def _stored(key: ResultKey, _compute: Callable[[], T]) -> T:
    return _compute()


def cached(kind: str, query: Query, compute: Callable[[], T], *extra: Hashable, spinner: str | None = None) -> T:
    """`compute()` once per (kind, query, extra); later calls, from any session, get a copy of that result.

    `spinner` is shown while computing (not on a cache hit: Streamlit shows a spinner only after half a second).
    """
    with st.spinner(spinner) if spinner else nullcontext():
        return _stored(result_key(kind, query, *extra), compute)
