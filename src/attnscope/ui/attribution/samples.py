"""The Attribution page's averages over a sample of sentences: the source/prefix split by target position, the
layer × method agreement and head statistics. Each runs sentence by sentence on request (ui/sample_runs.py):
it says its cost before it starts, shows progress, stops on any click, and keeps the sentences that finished."""
from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from attnscope.engine.analysis.dataset import (
    SharesByPosition,
    attributions_each,
    head_stats_each,
    head_stats_summary,
    shares_each,
)
from attnscope.engine.attribution.agreement import agreement_rows, best_layer, summarize_agreement
from attnscope.engine.attribution.exact_pass import float64_refusal
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.registry import references
from attnscope.engine.attribution.sentence import ALTI, VALUE_ZEROING
from attnscope.engine.decoding.translator import Translator
from attnscope.training.data import DataError, sample_pairs
from attnscope.ui import sample_runs, state, tables, widgets
from attnscope.ui.attribution.sentence import IG_MAX_POINTS, MAX_STATS_SAMPLE, ig_settings, ig_tolerance
from attnscope.ui.text import plain
from attnscope.viz.attribution import layer_agreement_figure, shares_by_position_figure

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd

MAX_SAMPLE = 100  # sentences for the layer comparison: each needs value zeroing and gradients
MAX_SPLIT_SAMPLE = 1014  # the split by position: ALTI+ and value zeroing, ~0.1 s a sentence (val has 1,014)
SAMPLE_DEFAULT = 10  # sentences a sample average starts with: seconds on the shipped model; the user may ask for more
SPLIT_DEFAULT = 20  # the split by position needs no gradients: twice as many in the same time
SPLITS = ("test_2016_flickr", "val", "test_2017_flickr")
STATS_BATCH = 64  # sentences decoded and captured together for head statistics
# The session keys of the sample runs (ui/sample_runs.py): the split by position, the layer comparison, head statistics.
SPLIT_RUN, LAYERS_RUN = state.Key("_attr_split_run"), state.Key("_attr_layers_run")
STATS_RUN = state.Key("_attr_stats_run")


def layer_summary(tr: Translator, n: int | None = None) -> tuple[int, pd.DataFrame] | None:
    """(sentences, layer × method agreement) of this session's layer comparison for this model, if one ran:
    over its first `n` sentences that finished (None: every one that did)."""
    run = state.stored(LAYERS_RUN)
    if not isinstance(run, sample_runs.SampleRun) or run.key[0] != tr.cache_key or not run.started:
        return None
    rows = run.finished(n)
    return (len(rows), summarize_agreement(rows)) if rows else None


def _layer_results(tr: Translator, run: sample_runs.SampleRun, n: int) -> None:
    """The layer × method agreement over the first `n` sentences that finished: figure, best layers, table."""
    saved = layer_summary(tr, n)
    if saved:
        count, summary = saved
        widgets.chart(layer_agreement_figure(summary), "attr-layers")
        refs = [r for r in references() if r in set(summary["reference"])]
        of = f" of {n}" if run.todo(n) else ""
        st.markdown(f"Over {count}{of} sentences, the cross-attention layer that best matches " +
                    "; ".join(f"{r}: **layer {best_layer(summary, r)}**" for r in refs) + ".")
        tables.table(summary.round(3), tables.LAYER_AGREEMENT)


def _stats_results(run: sample_runs.SampleRun, n: int) -> None:
    """Head statistics averaged over the first `n` sentences that finished."""
    frames = run.finished(n)
    if run.started and frames:
        of = f" of {n}" if run.todo(n) else ""
        st.caption(f"Head statistics over {len(frames)}{of} sentences (batched capture)")
        tables.table(head_stats_summary(frames).round(3), tables.HEAD_STATS)


def dataset_comparison(tr: Translator) -> None:
    """Layer × method agreement (one sentence at a time) and head statistics (in batches) over a sample; each
    says its cost before it starts, can be stopped, and keeps what finished; a model whose largest layer's float64
    copy does not fit in memory gets that sentence instead."""
    refused = float64_refusal(tr.model)
    if refused:
        st.error(refused)
        return
    cols = st.columns(3)  # the buttons go below, at full width: their labels carry the estimate
    split = cols[0].selectbox("Split", SPLITS, key="attr_split")
    n = cols[1].number_input(f"Sentences (layer comparison max {MAX_SAMPLE})", 1, MAX_STATS_SAMPLE, SAMPLE_DEFAULT,
                             key="attr_n")
    points = cols[2].number_input("IG path points per sentence (0: skip IG)", 0, IG_MAX_POINTS, 0, 16, key="attr_ig",
                                  help="Integrated gradients to the page's completeness tolerance, spending at most "
                                       f"this many path points (at least {IGSettings.panels * IGSettings.nodes}).")
    pasted = st.text_area("…or paste sentences, one per line (used instead of the split)", key="attr_pasted", height=80)
    ig = ig_settings((ig_tolerance(), max(int(points), IGSettings.panels * IGSettings.nodes) if points else 0))
    texts = sample_runs.sample_sentences(tr, split, int(n), pasted)
    if not texts:
        return
    sample = tuple(line for line in pasted.splitlines() if line.strip()) or split  # what the runs' sentences are
    layers = sample_runs.sample_run(LAYERS_RUN, (tr.cache_key, sample, ig))
    stats = sample_runs.sample_run(STATS_RUN, (tr.cache_key, sample), STATS_BATCH)
    sample_runs.controls(layers, texts[:MAX_SAMPLE], lambda chunk: ((i, agreement_rows(att))
                                                                    for i, att in attributions_each(tr, chunk, ig)),
                         "Compare layers", "attr_go")
    sample_runs.controls(stats, texts, lambda chunk: head_stats_each(tr, chunk, len(chunk)), "Head statistics",
                         "attr_stats_go", timed=STATS_BATCH)
    _layer_results(tr, layers, len(texts[:MAX_SAMPLE]))
    _stats_results(stats, len(texts))


def shares_by_position_view(tr: Translator, per_sentence: float) -> None:
    """The split by target position, averaged over the evaluation sample (embedded for the shipped pairs),
    sentence by sentence on request: estimate (`per_sentence`: the seconds the page's own sentence took),
    progress, Stop, and the finished sentences kept."""
    cols = st.columns(2)  # the button goes below, at full width: its label carries the estimate
    split = cols[0].selectbox("Sample", ("test_2016_flickr", "val"), key="split_sample")
    n = int(cols[1].number_input("Sentences", 10, MAX_SPLIT_SAMPLE, SPLIT_DEFAULT, 10, key="split_n",
                                 help="ALTI+ and value zeroing of each greedy translation, one sentence at a time."))
    try:
        texts = [s for s, _ in sample_pairs(tr.bundle.src_lang, tr.bundle.tgt_lang, split, n)]
    except DataError as err:
        st.warning(plain(err))
        return
    run = sample_runs.sample_run(SPLIT_RUN, (tr.cache_key, split))
    sample_runs.controls(run, texts, lambda chunk: shares_each(tr, chunk, len(chunk)), "Average over the sample",
                         "split_go", prior=per_sentence)
    rows = run.finished(len(texts))
    if not (run.started and rows):
        return
    shares = SharesByPosition.over(rows)
    of = f" of {len(texts)}" if run.todo(len(texts)) else ""
    widgets.chart(shares_by_position_figure(shares.counts, shares.mean, shares.sentences), "attr-split-position")
    st.caption(f"Over {shares.sentences}{of} sentences ({int(shares.counts.sum())} generated tokens): ALTI+ gives the "
               f"source {shares.overall(ALTI):.0%} of each token on average, value zeroing's rollout "
               f"{shares.overall(VALUE_ZEROING):.0%}. Voita et al. (\"Analyzing the Source and Target Contributions "
               "to Predictions in Neural Machine Translation\", ACL 2021) and Ferrando et al. (EMNLP 2022) report "
               "that the source's share is largest for the first tokens and falls as the target prefix grows. "
               "Positions with fewer than 10 tokens are left out.")
