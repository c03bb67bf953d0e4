"""Widgets of the Attribution page (cached attributions, the methods explained, integrated gradients'
completeness, the source/prefix split over a sample, alignment, the dataset comparison) and the Step
page's on-request view of what one decoding step relied on. Each tab asks only for what it shows: the
split needs ALTI+ alone, integrated gradients (most of the cost) run only for the tabs that show them."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from attnscope.engine.analysis.alignment import align, cross_map
from attnscope.engine.analysis.dataset import (
    SharesByPosition,
    attributions_each,
    head_stats_each,
    head_stats_summary,
    shares_each,
)
from attnscope.engine.attribution.agreement import agreement_rows, attention_best_layer, best_layer, summarize_agreement
from attnscope.engine.attribution.contributions import Contributions
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.saliency import Saliency
from attnscope.engine.attribution.sentence import (
    ALTI,
    ATTENTION,
    INTEGRATED,
    NORM,
    VALUE_ZEROING,
    SentenceAttribution,
    attribute,
    exact_contributions,
)
from attnscope.engine.attribution.step_attribution import StepAttributions, step_attributions
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.training.data import DataError, sample_pairs
from attnscope.ui import sample_runs, selection, tables, widgets
from attnscope.ui.query import Query, QueryKey
from attnscope.ui.text import plain
from attnscope.viz.attribution import alignment_figure, layer_agreement_figure, shares_by_position_figure

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd

TABS = ("Source vs prefix", "Source tokens by method", "Agreement", "Alignment", "Dataset")
MAX_SAMPLE = 100  # sentences for the layer comparison: each needs value zeroing and gradients
MAX_STATS_SAMPLE = 1000  # head statistics come from batched capture: 1,000 sentences take seconds
MAX_SPLIT_SAMPLE = 1014  # the split by position: ALTI+ and value zeroing, ~0.1 s a sentence (val has 1,014)
SAMPLE_DEFAULT = 10  # sentences a sample average starts with: seconds on the shipped model; the user may ask for more
SPLIT_DEFAULT = 20  # the split by position needs no gradients: twice as many in the same time
SPLITS = ("test_2016_flickr", "val", "test_2017_flickr")
STEP_TOP = 3  # source tokens listed per method for one step
SPLIT_RUN, LAYERS_RUN, STATS_RUN = "_attr_split_run", "_attr_layers_run", "_attr_stats_run"  # sample_runs.SampleRun
STATS_BATCH = 64  # sentences decoded and captured together for head statistics
IG_DONE = "_attr_ig"  # session key: (sentence key, (tolerance, points)) of the last attribution with integrated gradients
IG_MAX_POINTS = 1024  # the most path points a user may allow one sentence
NO_IG = (0.0, 0)  # (tolerance, points) of an attribution without integrated gradients

EXPLANATIONS = """
**Raw attention.** The softmax weights of cross-attention: how strongly a decoder query looks at each
source token. A weight is where a head looks, not what it passes on (Vaswani et al., "Attention Is All You Need", 2017).

**Norm-based attention** (Kobayashi et al., "Attention is Not Only a Weight: Analyzing Transformers with Vector
Norms", EMNLP 2020). Each weight is multiplied by the norm of what the head actually adds for that token (its value
vector through the head's slice of the output projection), so a 0.9 weight on a near-zero vector counts for little.

**ALTI+** (Ferrando et al., "Towards Opening the Black Box of Neural Machine Translation: Source and Target
Interpretations of the Transformer", EMNLP 2022). Each attention block's output is split exactly into one vector per
input token, the token's own residual path included, and a token's share is how close its vector is to the output
(Manhattan distance); the shares are composed over layers, the encoder's under the source tokens, so each generated
token's source and prefix shares sum to one and give the split.

**Value zeroing** (Mohebbi et al., "Quantifying Context Mixing in Transformers", EACL 2023). A token's value vectors
are zeroed in one layer and the change of every output representation (cosine distance) is its share, checkable by
re-running the model; composed over layers it ranks source tokens, but it never credits a token's own residual path,
so its split puts nearly everything on the source.

**Gradient × input.** The gradient of the generated token's log-probability with respect to each input token
embedding, times that embedding: a first-order estimate of how much the token mattered (Shrikumar et al., 2017).

**Integrated gradients** (Sundararajan et al., "Axiomatic Attribution for Deep Networks", ICML 2017). Gradients are
averaged along the path from zero embeddings to the real ones, so the attributions add up to the log-probability's
change along that path; the path integral is refined (adaptive Gauss-Legendre quadrature) until they do, within the
tolerance you set.

**Word alignment** (Garg et al., "Jointly Learning to Align and Translate with Transformer Models", EMNLP 2019).
Each generated word is linked to the source word its cross-attention favours (subword pieces merged into words);
words whose strongest pull is \\<eos\\> stay unlinked. Links download in Pharaoh "i-j" format (source word i, target word j).
"""

WHY_ALTI = ("Why ALTI+ for the source/prefix split: it counts every path into a token, the residual stream "
            "included, as the published analyses of source and target contributions do. Value zeroing, rolled out, "
            "credits the prefix only through self-attention and the source at every layer, so on the shipped en→de "
            "model its split averages 99% source; ALTI+ gives 74% for the first token, falling to ~55% by the 15th, "
            "the published trend (README: which measure, and why).")


def _ig(ig: tuple[float, int]) -> IGSettings | None:
    """(tolerance, path points) as the engine's settings; no points: no integrated gradients."""
    tolerance, points = ig
    return IGSettings(tolerance=tolerance, max_points=points) if points else None


@st.cache_data(max_entries=32, show_spinner="Computing attributions…")
def _attribute(_translator: Translator, _result: Translation, query_key: QueryKey, ig: tuple[float, int]) -> SentenceAttribution:
    return attribute(_translator, _result, _ig(ig))


def sentence_attribution(tr: Translator, query: Query, result: Translation, ig: tuple[float, int]) -> SentenceAttribution:
    """Every attribution of the page's translation, cached per checkpoint, sentence and integrated-gradients
    settings (tolerance, path points); remembered per session, so the Step page can show integrated
    gradients without computing them."""
    query.check(tr)
    att = _attribute(tr, result, query.key, ig)
    st.session_state[IG_DONE] = (query.key, ig)
    return att


def ig_controls() -> tuple[float, int]:
    """The completeness integrated gradients must reach, and the path points they may spend: (fraction, points)."""
    cols = st.columns(2)
    percent = cols[0].number_input("Integrated gradients: completeness tolerance (%)", 0.5, 50.0, 5.0, 0.5,
                                   key="ig_tolerance", persist_state="session",
                                   help="Path points are added where the attributions fail to add up, until every "
                                        "token's attributions sum to its change in log-probability within this many "
                                        "percent (or, for changes under 1 nat, this many hundredths of a nat).")
    points = cols[1].number_input("…spending at most this many path points", IGSettings.panels * IGSettings.nodes,
                                  IG_MAX_POINTS, IGSettings.max_points, key="ig_points", persist_state="session",
                                  help="Each path point is one forward and backward pass per token; time grows with them.")
    return percent / 100, int(points)


def every_attribution(tr: Translator, query: Query, result: Translation) -> tuple[SentenceAttribution, int]:
    """For the tabs that show integrated gradients: their settings, every attribution of the translation, how
    complete integrated gradients are; and the sidebar's layer as it exists in this model's decoder."""
    att = sentence_attribution(tr, query, result, ig_controls())
    completeness_report(att.integrated_gradients)
    n_layers = att.weights.n_layers("cross")
    return att, min(st.session_state.get("layer", n_layers - 1), n_layers - 1)


def completeness_report(ig: Saliency | None) -> None:
    """Say plainly how complete integrated gradients are: met for every token, or how many missed and by how much."""
    if ig is None or ig.settings is None:
        return
    settings, complete = ig.settings, ig.complete
    small = np.abs(ig.score - ig.baseline_score) < settings.floor  # judged in nats, not percent
    parts = []
    if (~small).any():
        rel = ig.relative_gap[~small]
        parts.append(f"within {float(np.median(rel)):.1%} at the median and {float(rel.max()):.1%} at worst")
    if small.any():
        parts.append(f"within {float(ig.gap[small].max()):.3f} nats for the {int(small.sum())} whose log-probability "
                     f"changes by less than {settings.floor:g} nat")
    said = (f"Integrated gradients used {ig.points} path points: the attributions add up to each token's change in "
            f"log-probability {'; '.join(parts)}.")
    tolerance = f"{settings.tolerance:.1%} of the change, or {settings.tolerance * settings.floor:.2g} nats"
    if complete.all():
        st.caption(f"{said} Every token met the tolerance ({tolerance}).")
    else:
        st.warning(f"{said} {int((~complete).sum())} of {len(complete)} tokens missed the tolerance ({tolerance}) "
                   f"within the budget of {settings.max_points} path points: allow more path points to close the gap.")


def alignment_view(tr: Translator, query: Query, result: Translation) -> None:
    """Pick a layer (or the best by agreement with value zeroing on this sentence) and heads; links and download."""
    record = result.attention
    n_layers, n_heads = record.n_layers("cross"), record.n_heads
    sample = layer_summary(tr)
    if sample:  # the Dataset tab's comparison, when it was run for this model
        best, basis = best_layer(sample[1], VALUE_ZEROING), f"over {sample[0]} sentences"
    else:
        best, basis = attention_best_layer(record, contributions(tr, query, result)[1].source), "on this sentence"
    cols = st.columns(2)
    label = f"best by agreement with value zeroing {basis} (layer {best})"
    choice = cols[0].selectbox("Layer", ["best", *range(n_layers)], key="align_layer",
                               format_func=lambda o: label if isinstance(o, str) else f"layer {o}")
    layer = best if isinstance(choice, str) else int(choice)
    heads = cols[1].multiselect("Heads (none: mean of all)", list(range(n_heads)), key="align_heads")
    alignment = align(cross_map(record, layer, heads or None), result.source_tokens, result.output_tokens)
    widgets.chart(alignment_figure(alignment), "alignment")
    st.code(alignment.pharaoh() or "(no links)", language=None)
    st.download_button("Alignment (Pharaoh i-j)", alignment.pharaoh() + "\n", "attnscope-alignment.txt", "text/plain",
                       key="align_download")


def _sample(tr: Translator, split: str, n: int, pasted: str) -> list[str] | None:
    lines = [line for line in pasted.splitlines() if line.strip()]
    if lines:
        return lines[:n]
    try:
        return [s for s, _ in sample_pairs(tr.bundle.src_lang, tr.bundle.tgt_lang, split, n)]
    except DataError as err:
        st.warning(plain(err))
        return None


def layer_summary(tr: Translator, n: int | None = None) -> tuple[int, pd.DataFrame] | None:
    """(sentences, layer × method agreement) of this session's layer comparison for this model, if one ran:
    over its first `n` sentences that finished (None: every one that did)."""
    run = st.session_state.get(LAYERS_RUN)
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
        refs = [r for r in (ALTI, VALUE_ZEROING, INTEGRATED, "gradient × input") if r in set(summary["reference"])]
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
    says its cost before it starts, can be stopped, and keeps what finished."""
    cols = st.columns(4)
    split = cols[0].selectbox("Split", SPLITS, key="attr_split")
    n = cols[1].number_input(f"Sentences (layer comparison max {MAX_SAMPLE})", 1, MAX_STATS_SAMPLE, SAMPLE_DEFAULT,
                             key="attr_n")
    points = cols[2].number_input("IG path points per sentence (0: skip IG)", 0, IG_MAX_POINTS, 0, 16, key="attr_ig",
                                  help="Integrated gradients to the page's completeness tolerance, spending at most "
                                       f"this many path points (at least {IGSettings.panels * IGSettings.nodes}).")
    pasted = st.text_area("…or paste sentences, one per line (used instead of the split)", key="attr_pasted", height=80)
    tolerance = st.session_state.get("ig_tolerance", 5.0) / 100
    ig = _ig((tolerance, max(int(points), IGSettings.panels * IGSettings.nodes) if points else 0))
    texts = _sample(tr, split, int(n), pasted)
    if not texts:
        return
    sample = tuple(line for line in pasted.splitlines() if line.strip()) or split  # what the runs' sentences are
    layers = sample_runs.sample_run(LAYERS_RUN, (tr.cache_key, sample, ig))
    stats = sample_runs.sample_run(STATS_RUN, (tr.cache_key, sample))
    with cols[3]:
        sample_runs.controls(layers, texts[:MAX_SAMPLE], lambda chunk: ((i, agreement_rows(att))
                                                                        for i, att in attributions_each(tr, chunk, ig)),
                             "Compare layers", "attr_go")
        sample_runs.controls(stats, texts, lambda chunk: head_stats_each(tr, chunk, len(chunk)), "Head statistics",
                             "attr_stats_go", chunk=STATS_BATCH, timed=STATS_BATCH)
    _layer_results(tr, layers, len(texts[:MAX_SAMPLE]))
    _stats_results(stats, len(texts))


@st.cache_data(max_entries=32, show_spinner="Computing ALTI+ and value zeroing…")
def _contributions(_translator: Translator, _result: Translation, query_key: QueryKey) -> tuple[Contributions, Contributions]:
    return exact_contributions(_translator, _result)


def contributions(tr: Translator, query: Query, result: Translation) -> tuple[Contributions, Contributions]:
    """ALTI+ (the source/prefix split) and value zeroing (the alignment's reference) of the translation, without
    gradients: a fraction of a second; cached per checkpoint and sentence."""
    query.check(tr)
    return _contributions(tr, result, query.key)


def shares_by_position_view(tr: Translator) -> None:
    """The split by target position, averaged over the evaluation sample (embedded for the shipped pairs),
    sentence by sentence on request: estimate, progress, Stop, and the finished sentences kept."""
    cols = st.columns(3)
    split = cols[0].selectbox("Sample", ("test_2016_flickr", "val"), key="split_sample")
    n = int(cols[1].number_input("Sentences", 10, MAX_SPLIT_SAMPLE, SPLIT_DEFAULT, 10, key="split_n",
                                 help="ALTI+ and value zeroing of each greedy translation, one sentence at a time."))
    try:
        texts = [s for s, _ in sample_pairs(tr.bundle.src_lang, tr.bundle.tgt_lang, split, n)]
    except DataError as err:
        st.warning(plain(err))
        return
    run = sample_runs.sample_run(SPLIT_RUN, (tr.cache_key, split))
    with cols[2]:
        sample_runs.controls(run, texts, lambda chunk: shares_each(tr, chunk, len(chunk)), "Average over the sample",
                             "split_go")
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


@st.cache_data(max_entries=32, show_spinner="Attributing this translation…")
def _step_attributions(_translator: Translator, _result: Translation, query_key: QueryKey, ig: tuple[float, int],
                       layer: int) -> tuple[StepAttributions, int | None]:
    """The step view of the sentence's attributions, and the path points integrated gradients spent (None: not run)."""
    att = _attribute(_translator, _result, query_key, ig)
    return step_attributions(att, layer), att.integrated_gradients.points if att.integrated_gradients else None


def _tokens(tokens: tuple[str, ...], top: list[tuple[int, float]], fmt: str) -> str:
    return " · ".join(f"{j} “{plain(tokens[j])}” {value:{fmt}}" for j, value in top)


def _split_markdown(s: StepAttributions, t: int) -> str:
    share = float(s.source_share[t])
    prefix = _tokens(s.prefix_tokens, s.top(s.prefix[:, : t + 1], t, 2), ".1%")  # step t reads inputs 0..t
    return (f"**Step {t} → “{plain(s.output_tokens[t])}”** drew **{share:.0%}** on the source and **{1 - share:.0%}** "
            f"on the target prefix (most: {prefix}) — {s.split_method}, Ferrando et al., EMNLP 2022.")


def _methods_markdown(s: StepAttributions, t: int, ig_points: int | None) -> str:
    rows = [f"| method | top source tokens | Spearman with {s.reference} | same top token |", "|---|---|---|---|"]
    named = {ATTENTION: f"{ATTENTION} (layer {s.layer})", NORM: f"{NORM} (layer {s.layer})",
             INTEGRATED: f"{INTEGRATED} ({ig_points} path points)"}
    for method, scores in s.maps.items():
        name = named.get(method, method)
        if method == s.reference:
            agree = ("—", "—")
        else:
            rho = float(s.spearman[method][t])
            agree = ("—" if np.isnan(rho) else f"{rho:.2f}", "yes" if s.top1[method][t] else "no")
        rows.append(f"| {name} | {_tokens(s.source_tokens, s.top(scores, t, STEP_TOP), '.3g')} | {agree[0]} | {agree[1]} |")
    return "\n".join(rows)


def step_contributions(tr: Translator, query: Query, result: Translation, t: int) -> None:
    """On request, what decoding step `t` relied on: its source/prefix split (ALTI+), the top source
    tokens by each method and their agreement with value zeroing. The sentence is attributed once (cached);
    moving between steps only slices it. Integrated gradients join once computed on the Attribution page."""
    if not st.toggle("Show what this step relied on (attribution)", key="step_attr"):
        return
    done = st.session_state.get(IG_DONE)
    query.check(tr)
    ig = done[1] if done and done[0] == query.key else NO_IG
    s, ig_points = _step_attributions(tr, result, query.key, ig, selection.layer(result.attention, "cross"))
    st.markdown(_split_markdown(s, t))
    st.markdown(_methods_markdown(s, t, ig_points))
    st.caption("Scores over the source tokens (position, token, score): in the sidebar's layer, cross-attention weights "
               "(mean of heads) and norm-based attention (the heads' summed vectors, Kobayashi et al., EMNLP 2020); "
               "ALTI+ and value-zeroing shares; gradient magnitudes (Shrikumar et al. 2017; integrated gradients, "
               "Sundararajan et al., ICML 2017). "
               + ("" if ig_points else "Integrated gradients appear here once computed on the Attribution page "
                                       "(its tab Source tokens by method). ")
               + "Agreement is over this token's source scores; the Attribution page explains each measure.")
