"""Figures kept across reruns, built once per (model, sentence, options, view).

Building a plotly figure (or a step's HTML views) costs 10-20 ms and a page draws several; stepping through decoding
or switching a tab would rebuild all of them. These caches are `st.cache_resource`, shared by
every session: callers only pass the figures to `st.plotly_chart` (which copies them) and
never modify them. `key` names the result exactly (`ui.cache.result_key`: its kind and query), so a
figure never outlives the translation it was drawn from.
"""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go
import streamlit as st

from attnscope.engine.decoding.translator import Translation
from attnscope.records.attention import AttentionRecord, Kind
from attnscope.ui.cache import ResultKey
from attnscope.ui.state import ViewState
from attnscope.ui.values_switch import value_labels
from attnscope.viz.grid import heads_grid
from attnscope.viz.heatmap import LONG_INPUT, is_long, record_heatmap
from attnscope.viz.steps import step_rows, step_source, top_k_bars


@dataclass(frozen=True)
class StepViews:
    """Everything the Step page draws for one decoding step, as HTML (see viz/html.py for why)."""

    source: str  # the source shaded by the selected head's cross-attention
    top_k: str  # next-token probabilities
    cross: str  # the step's cross-attention rows, every layer and head
    self_: str  # the step's masked self-attention rows


def step_views(result: Translation, record: AttentionRecord, key: ResultKey, t: int, layer: int, head: int | None,
               norms: bool = False) -> StepViews:
    """The views of step `t` of `result` (named by `key`), for one sidebar layer and head.

    `record` is the result's attention, or its weighted value norms when `norms` (the values switch). Only the
    shaded source depends on the sidebar's layer and head, so it is cached apart from the step's rows of every
    layer and head (~0.2 MB of HTML for a 30-token sentence), which are kept once per step, not once per head.
    """
    return StepViews(_step_source(record, key, t, layer, head, norms), *_step_rows(result, record, key, t, norms))


@st.cache_resource(max_entries=1024, show_spinner=False)
def _step_source(_record: AttentionRecord, key: ResultKey, t: int, layer: int, head: int | None, norms: bool) -> str:
    return step_source(_record.step(t), layer, head, value_labels(norms)[0])


@st.cache_resource(max_entries=256, show_spinner=False)
def _step_rows(_result: Translation, _record: AttentionRecord, key: ResultKey, t: int, norms: bool) -> tuple[str, str, str]:
    """The step's next-token probabilities and its cross- and self-attention rows of every layer and head."""
    rows = _record.step(t)
    value, note = value_labels(norms)
    suffix = f" · {note}" if note else ""
    return (top_k_bars(_result.steps[t]),
            step_rows(rows.cross, _result.source_tokens, title=f"Cross-attention of step {t}, every layer and head{suffix}",
                      value=value),
            step_rows(rows.decoder_self, _result.target_tokens, n_visible=t + 1, value=value,
                      title=f"Decoder masked self-attention of step {t} (grey: future positions, masked){suffix}"))


@st.cache_resource(max_entries=256, show_spinner=False)
def heatmap(_result: Translation, _record: AttentionRecord, key: ResultKey, kind: Kind, layer: int, head: int | None,
            per_head_scale: bool | None = None, norms: bool = False) -> go.Figure:
    """One head (or the mean) of one layer; cross rows are labelled by the token each step produced."""
    rows = _result.output_tokens if kind == "cross" else None
    value, note = value_labels(norms)
    return record_heatmap(_record, kind, layer, head, per_head_scale=per_head_scale, row_labels=rows, value=value,
                          title_note=note)


@st.cache_resource(max_entries=256, show_spinner=False)
def grid(_result: Translation, _record: AttentionRecord, key: ResultKey, kind: Kind, layer: int, head: int | None,
         per_head_scale: bool | None = None, norms: bool = False) -> go.Figure:
    """Every layer and head of one kind, the selected one outlined."""
    rows = _result.output_tokens if kind == "cross" else None
    value, note = value_labels(norms)
    return heads_grid(_record, kind, per_head_scale=per_head_scale, row_labels=rows, selected=(layer, head), value=value,
                      title_note=note)


def longest_side(record: AttentionRecord) -> tuple[int, bool]:
    """The record's longer token sequence, and whether it is long enough to look pale on a 0–1 colour scale."""
    n_tokens = max(len(record.source_tokens), len(record.target_tokens))
    return n_tokens, is_long(n_tokens)


def scaled_per_head(view: ViewState, record: AttentionRecord) -> bool:
    """Whether `record`'s maps are scaled per head, by the Translate page's rule: its toggle for a sentence of this
    length (on by default for a long one, see longest_side), so every page colours the same sentence alike."""
    return view.per_head_scale_long if longest_side(record)[1] else view.per_head_scale


def long_caption(n_tokens: int) -> str:
    """Why a long sentence's maps are scaled per head."""
    return (f"{n_tokens} tokens: attention spread over more than {LONG_INPUT} tokens is pale on a 0–1 scale, "
            "so each map is scaled to its own maximum here; tick labels show every few tokens (hover for all).")
