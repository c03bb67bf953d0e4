"""One cache for results computed from a query (a translation, a forced branch, weighted value norms...), within a
memory budget.

Results are shared by every session (so many users on one model translate a sentence once), each caller getting
its own copy. Entries are named `(kind, query.key, *extra)`, so results of different kinds never collide. They live
in one ResultStore (ui/result_store.py) of at most `budget_bytes()`: the least recently used go first, so a server
that runs for days holds steady, and a page that has to compute a dropped result again says so.
"""
from __future__ import annotations

import os
from contextlib import nullcontext
from typing import Callable, Hashable, TypeVar

import streamlit as st

from attnscope.model.budget import available_bytes
from attnscope.records.attention import KINDS, AttentionRecord
from attnscope.ui.query import Query
from attnscope.ui.result_store import ResultStore

T = TypeVar("T")
BUDGET_MB = "ATTNSCOPE_RESULTS_MB"  # the results' memory budget in MB; by default a quarter of the memory available
DEFAULT_SHARE, DEFAULT_MAX = 0.25, 192 << 20  # at the server's start, at most 192 MB

ResultKey = tuple[Hashable, ...]  # names one result: (kind, query key, extra arguments...)


def budget_bytes() -> int:
    """The results' memory budget: ATTNSCOPE_RESULTS_MB when set, else a quarter of what the machine has available, at
    most 192 MB: an opus-mt-sized 400-token translation with every head is ~35 MB, a typical sentence's ~100 KB, and
    with 1 GB the server grew by 760 MB over 20 sessions of long outputs (BENCHMARKS.md, issue 44)."""
    value = os.environ.get(BUDGET_MB, "").strip()
    if value:
        try:
            return max(1, int(float(value) * 2**20))
        except ValueError:
            pass  # not a number: the default, as for an unset variable
    return int(min(DEFAULT_MAX, available_bytes() * DEFAULT_SHARE))


@st.cache_resource(show_spinner=False)
def _store() -> ResultStore:
    """The server's one store of results (a Streamlit resource: made once, shared by every session)."""
    return ResultStore(budget_bytes())


def dropped_note(budget: int) -> str:
    return (f"This result had been dropped to keep the server's results within their memory budget ({budget / 2**20:,.0f} "
            f"MB, least recently used first; {BUDGET_MB} sets it), so it was computed again.")


def held_note(record: AttentionRecord, budget: int) -> str:
    """What capture holds for a sentence, in one line: its recorded arrays' size and type, each kind's shape (layers
    × heads × rows × columns), and the budget the server keeps its results within (`dropped_note`: when one went)."""
    shapes = ", ".join(f"{kind} {' × '.join(map(str, record.array(kind).shape))}" for kind in KINDS)
    size = sum(record.array(kind).nbytes for kind in KINDS)
    said = f"{size / 2**20:,.1f} MB" if size >= 2**20 else f"{size / 2**10:,.1f} KB"
    return (f"Recorded attention: {said} of {record.encoder.dtype} ({shapes}: layers × heads × rows × "
            f"columns), kept with the server's results within {budget / 2**20:,.0f} MB, least recently used first.")


def show_held(record: AttentionRecord) -> None:
    """`held_note` of `record` under the page's figures."""
    st.caption(held_note(record, _store().budget))


def result_key(kind: str, query: Query, *extra: Hashable) -> ResultKey:
    """The name of the `kind` result of `query` (with `extra` arguments, e.g. a forced prefix)."""
    return (kind, query.key, *extra)


def cached(kind: str, query: Query, compute: Callable[[], T], *extra: Hashable, spinner: str | None = None,
           shared: Callable[[T], bool] = lambda _: True) -> T:
    """`compute()` once per (kind, query, extra); later calls, from any session, get a copy of that result while the
    memory budget keeps it.

    `spinner` is shown while computing (not when the result is kept); a result that is not `shared` (e.g. a decode
    this session stopped) is returned without being kept.
    """
    key, store = result_key(kind, query, *extra), _store()
    kept, value = store.get(key)
    if kept:
        return value
    with store.computing(key):
        kept, value = store.get(key)  # another session may have computed it meanwhile
        if kept:
            return value
        again = store.was_dropped(key)
        with st.spinner(spinner) if spinner else nullcontext():
            value = compute()
        if not shared(value):
            return value
        store.put(key, value)
    if again:
        st.caption(dropped_note(store.budget))
    return value
