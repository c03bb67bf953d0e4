"""Results computed from a query, cached (ui.cache): the translation, a forced branch, a teacher-forced
reference or beam hypothesis. Bad input gives None and a one-line warning instead of a traceback."""
from __future__ import annotations

from typing import Callable, Hashable

import streamlit as st

from attnscope.engine.decoding.translator import InputError, Translation, Translator
from attnscope.ui.cache import cached, result_key
from attnscope.ui.live_decode import decode_live, stopped
from attnscope.ui.query import Query
from attnscope.ui.text import plain


def _warned(kind: str, tr: Translator, query: Query, compute: Callable[[], Translation], *extra: Hashable,
            spinner: str | None) -> Translation | None:
    """The cached result (a stopped decode's only in this session), or None with the input's problem as a warning."""
    query.check(tr)
    try:
        return cached(kind, query, compute, *extra, spinner=spinner, shared=lambda result: not result.stopped)
    except InputError as err:
        st.warning(plain(err))
        return None


def translate(tr: Translator, query: Query) -> Translation | None:
    """The translation of `query` with every head captured, shown as it decodes (ui/live_decode.py: greedy token by
    token, a beam search's best hypothesis after each step); when stopped, what was decoded is the result (marked
    stopped)."""
    name = result_key("translate", query)
    return stopped(name) or _warned("translate", tr, query, lambda: decode_live(tr, query, name), spinner=None)


def force(tr: Translator, query: Query, prefix: tuple[int, ...]) -> Translation | None:
    """Greedy continuation of `query`'s sentence after forcing `prefix`."""
    return _warned("force", tr, query, lambda: tr.translate(query.sentence, max_len=query.max_len, prefix=prefix,
                                                            rules=query.rules, task_prefix=query.task_prefix),
                   prefix, spinner="Decoding the forced branch…")


def score(tr: Translator, query: Query, reference: str) -> Translation | None:
    """Teacher-forced record of `reference` as the output for `query`'s sentence (cached per sentence and
    reference: the beam size and output limit do not change a forced output)."""
    query.check(tr)
    sentence_only = Query.of(tr, query.sentence, task_prefix=query.task_prefix)
    return _warned("score", tr, sentence_only, lambda: tr.score(query.sentence, reference, task_prefix=query.task_prefix),
                   reference,
                   spinner="Scoring…")


def hypothesis(tr: Translator, query: Query, ids: tuple[int, ...]) -> Translation:
    """Teacher-forced record of a given output, e.g. one beam hypothesis of `query`."""
    query.check(tr)
    return cached("hypothesis", query, lambda: tr.hypothesis(query.sentence, ids, task_prefix=query.task_prefix), ids)
