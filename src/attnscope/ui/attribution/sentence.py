"""Widgets of the Attribution page on its sentence (cached attributions, the methods explained, integrated
gradients' completeness, alignment) and the Step page's on-request view of what one decoding step relied on.
Each tab asks only for what it shows: the split needs ALTI+ alone, the alignment value zeroing, and integrated
gradients (most of the cost) run only for the tabs that show them. Sample averages: samples.py."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TypeVar

import numpy as np
import streamlit as st

from attnscope.engine.analysis.alignment import align, cross_map
from attnscope.engine.attribution.agreement import attention_best_layer, best_layer
from attnscope.engine.attribution.contributions import Contributions
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.registry import TOKEN, explanations, method, methods
from attnscope.engine.attribution.saliency import Saliency
from attnscope.engine.attribution.sentence import (
    INTEGRATED,
    VALUE_ZEROING,
    SentenceAttribution,
    attribute,
    exact_contributions,
)
from attnscope.engine.attribution.step_attribution import StepAttributions, step_attributions
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.ui import selection, state, widgets
from attnscope.ui.cache import cached
from attnscope.ui.query import Query
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain
from attnscope.viz.attribution import alignment_figure

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd

T = TypeVar("T")
TABS = ("Source vs prefix", "Source tokens by method", "Agreement", "Alignment", "Dataset")
MAX_STATS_SAMPLE = 1000  # head statistics come from batched capture: 1,000 sentences take seconds
STEP_TOP = 3  # source tokens listed per method for one step
IG_MAX_POINTS = 1024  # the most path points a user may allow one sentence
NO_IG = (0.0, 0)  # (tolerance, points) of an attribution without integrated gradients
IG_TOLERANCE = state.Key("ig_tolerance")  # the completeness integrated gradients must reach, in percent
IG_DONE = state.Key("_attr_ig")  # (query key, (tolerance, points)) of the last one with integrated gradients

ALIGNMENT_EXPLANATION = """
**Word alignment** (Garg et al., "Jointly Learning to Align and Translate with Transformer Models", EMNLP 2019).
Each generated word is linked to the source word its cross-attention favours (subword pieces merged into words);
words whose strongest pull is \\<eos\\> stay unlinked. Links download in Pharaoh "i-j" format (source word i, target word j).
"""

WHY_ALTI = ("Why ALTI+ for the source/prefix split: it counts every path into a token, the residual stream "
            "included, as the published analyses of source and target contributions do. Value zeroing, rolled out, "
            "credits the prefix only through self-attention and the source at every layer, so on the shipped en→de "
            "model its split averages 99% source; ALTI+ gives 74% for the first token, falling to ~55% by the 15th, "
            "the published trend (docs/attribution.md: which measure, and why).")


def method_table(explains: str = TOKEN) -> str:
    """The registry's methods as a markdown table: what each computes, whether it is exact, what it costs."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")
    rows = [f"| {cell(m.name)} | {cell(m.computes)} | {'yes' if m.exact else 'no: an estimate'} | {cell(m.cost)} |"
            for m in methods(explains)]
    return "\n".join(["| method | what it computes | exact | cost |", "|---|---|---|---|", *rows])


def explained() -> str:
    """What every measure is (the registry's table and paragraphs, in order), then word alignment."""
    return f"{method_table()}\n\n{explanations()}\n\n{ALIGNMENT_EXPLANATION.strip()}"


def ig_settings(ig: tuple[float, int]) -> IGSettings | None:
    """(tolerance, path points) as the engine's settings; no points: no integrated gradients."""
    tolerance, points = ig
    return IGSettings(tolerance=tolerance, max_points=points) if points else None


def _attribute(tr: Translator, result: Translation, query: Query, ig: tuple[float, int]) -> SentenceAttribution:
    """Every attribution, ALTI+ and value zeroing from the split tab's cache, with a progress bar while the rest
    run (a kept result draws none)."""
    def compute() -> SentenceAttribution:
        exact = contributions(tr, query, result)
        bar = st.progress(0.0, text="Computing attributions…")

        def show(what: str, done: float) -> None:
            bar.progress(min(done, 1.0), text=f"{what[0].upper()}{what[1:]}…" + (f" {done:.0%}" if done else ""))

        att = attribute(tr, result, ig_settings(ig), show, (exact.alti_plus, exact.value_zeroing))
        bar.empty()
        return att
    return cached("attribution", query, compute, ig)


def sentence_attribution(tr: Translator, query: Query, result: Translation, ig: tuple[float, int]) -> SentenceAttribution:
    """Every attribution of the page's translation, cached per checkpoint, sentence and integrated-gradients
    settings (tolerance, path points); remembered per session, so the Step page can show integrated
    gradients without computing them."""
    query.check(tr)
    att = fitting(lambda: _attribute(tr, result, query, ig))
    state.store(IG_DONE, (query.key, ig))
    return att


def ig_tolerance() -> float:
    """The completeness tolerance the user set for integrated gradients (a fraction; the Dataset tab's too)."""
    return state.stored(IG_TOLERANCE, 5.0) / 100


def ig_controls() -> tuple[float, int]:
    """The completeness integrated gradients must reach, and the path points they may spend: (fraction, points)."""
    cols = st.columns(2)
    percent = cols[0].number_input("Integrated gradients: completeness tolerance (%)", 0.5, 50.0, 5.0, 0.5,
                                   key=IG_TOLERANCE, persist_state="session",
                                   help="Path points are added where the attributions fail to add up, until every "
                                        "token's attributions sum to its change in log-probability within this many "
                                        "percent (or, for changes under 1 nat, this many hundredths of a nat).")
    points = cols[1].number_input("…spending at most this many path points", IGSettings.panels * IGSettings.nodes,
                                  IG_MAX_POINTS, IGSettings.max_points, key="ig_points", persist_state="session",
                                  help="Each path point costs a gradient of every generated token (batched, 16 points "
                                       "at a time); time grows with them, about linearly.")
    return percent / 100, int(points)


def every_attribution(tr: Translator, view: ViewState, query: Query, result: Translation) -> tuple[SentenceAttribution, int]:
    """For the tabs that show integrated gradients: their settings, every attribution of the translation, how
    complete integrated gradients are; and the sidebar's layer as it exists in this model's decoder."""
    att = sentence_attribution(tr, query, result, ig_controls())
    completeness_report(att.integrated_gradients)
    n_layers = att.weights.n_layers("cross")
    return att, selection.fit_layer(view, n_layers)


def completeness_report(ig: Saliency | None, change: str = "each token's change in log-probability") -> None:
    """Say plainly how complete integrated gradients are: met for every token, or how many missed and by how much
    (`change`: what the attributions add up to; a contrast's is the change of its log-probability difference)."""
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
    said = (f"Integrated gradients used {ig.points} path points: the attributions add up to {change} "
            f"{'; '.join(parts)}.")
    tolerance = f"{settings.tolerance:.1%} of the change, or {settings.tolerance * settings.floor:.2g} nats"
    if complete.all():
        st.caption(f"{said} Every token met the tolerance ({tolerance}).")
    else:
        st.warning(f"{said} {int((~complete).sum())} of {len(complete)} tokens missed the tolerance ({tolerance}) "
                   f"within the budget of {settings.max_points} path points: allow more path points to close the gap.")


def alignment_view(tr: Translator, query: Query, result: Translation, sample: tuple[int, pd.DataFrame] | None) -> None:
    """Pick a layer (the best by agreement with value zeroing: over the Dataset tab's `sample` (sentences,
    summary) when one ran, else on this sentence) and heads; links and download."""
    record = result.attention
    n_layers, n_heads = record.n_layers("cross"), record.n_heads
    if sample:
        best, basis = best_layer(sample[1], VALUE_ZEROING), f"over {sample[0]} sentences"
    else:
        best, basis = attention_best_layer(record, contributions(tr, query, result).value_zeroing.source), "on this sentence"
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


@dataclass(frozen=True)
class Exact:
    """ALTI+ and value zeroing of the page's sentence, from one float64 pass, and the seconds it took: the
    per-sentence work of the split's sample average, so its estimate needs no sentence of its own."""

    alti_plus: Contributions  # the source/prefix split
    value_zeroing: Contributions  # the alignment's reference
    seconds: float


def contributions(tr: Translator, query: Query, result: Translation) -> Exact:
    """ALTI+ and value zeroing of the translation, without gradients (a fraction of a second); cached per
    checkpoint and sentence."""
    query.check(tr)

    def compute() -> Exact:
        start = time.perf_counter()
        split, vz = exact_contributions(tr, result)
        return Exact(split, vz, time.perf_counter() - start)
    return fitting(lambda: cached("contributions", query, compute, spinner="Computing ALTI+ and value zeroing…"))


def fitting(compute: Callable[[], T]) -> T:
    """`compute()`, or its one sentence and the page stopped there when the float64 copy of one layer that the
    exact methods need does not fit in the memory available (a big model: README, 'Big models')."""
    try:
        return compute()
    except MemoryError as err:
        st.error(str(err))
        st.stop()
        raise  # st.stop() ends the script run; unreachable there


def _step_attributions(tr: Translator, result: Translation, query: Query, ig: tuple[float, int],
                       layer: int) -> tuple[StepAttributions, int | None]:
    """The step view of the sentence's attributions, and the path points integrated gradients spent (None: not run)."""
    def compute() -> tuple[StepAttributions, int | None]:
        att = _attribute(tr, result, query, ig)
        return step_attributions(att, layer), att.integrated_gradients.points if att.integrated_gradients else None
    return cached("step attributions", query, compute, ig, layer, spinner="Attributing this translation…")


def _tokens(tokens: tuple[str, ...], top: list[tuple[int, float]], fmt: str) -> str:
    return " · ".join(f"{j} “{plain(tokens[j])}” {value:{fmt}}" for j, value in top)


def _split_markdown(s: StepAttributions, t: int) -> str:
    share = float(s.source_share[t])
    prefix = _tokens(s.prefix_tokens, s.top(s.prefix[:, : t + 1], t, 2), ".1%")  # step t reads inputs 0..t
    return (f"**Step {t} → “{plain(s.output_tokens[t])}”** drew **{share:.0%}** on the source and **{1 - share:.0%}** "
            f"on the target prefix (most: {prefix}) — {s.split_method}, Ferrando et al., EMNLP 2022.")


def _methods_markdown(s: StepAttributions, t: int, ig_points: int | None) -> str:
    rows = [f"| method | top source tokens | Spearman with {s.reference} | same top token |", "|---|---|---|---|"]
    for name, scores in s.maps.items():
        if name == s.reference:
            agree = ("—", "—")
        else:
            rho = float(s.spearman[name][t])
            agree = ("—" if np.isnan(rho) else f"{rho:.2f}", "yes" if s.top1[name][t] else "no")
        if method(name).per_layer:
            name = f"{name} (layer {s.layer})"
        elif name == INTEGRATED:
            name = f"{name} ({ig_points} path points)"
        rows.append(f"| {name} | {_tokens(s.source_tokens, s.top(scores, t, STEP_TOP), '.3g')} | {agree[0]} | {agree[1]} |")
    return "\n".join(rows)


def step_contributions(tr: Translator, view: ViewState, query: Query, result: Translation, t: int) -> None:
    """On request, what decoding step `t` relied on: its source/prefix split (ALTI+), the top source
    tokens by each method and their agreement with value zeroing. The sentence is attributed once (cached);
    moving between steps only slices it. Integrated gradients join once computed on the Attribution page."""
    if not st.toggle("Show what this step relied on (attribution)", key="step_attr"):
        return
    done = state.stored(IG_DONE)
    query.check(tr)
    ig = done[1] if done and done[0] == query.key else NO_IG
    s, ig_points = fitting(lambda: _step_attributions(tr, result, query, ig,
                                                      selection.layer(view, result.attention, "cross")))
    st.markdown(_split_markdown(s, t))
    st.markdown(_methods_markdown(s, t, ig_points))
    st.caption("Scores over the source tokens (position, token, score): in the sidebar's layer, cross-attention weights "
               "(mean of heads) and norm-based attention (the heads' summed vectors, Kobayashi et al., EMNLP 2020); "
               "ALTI+ and value-zeroing shares; gradient magnitudes (Shrikumar et al. 2017; integrated gradients, "
               "Sundararajan et al., ICML 2017). "
               + ("" if ig_points else "Integrated gradients appear here once computed on the Attribution page "
                                       "(its tab Source tokens by method). ")
               + "Agreement is over this token's source scores; the Attribution page explains each measure.")
