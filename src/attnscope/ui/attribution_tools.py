"""Widgets of the Attribution page (cached attributions, the methods explained, alignment, the dataset
comparison) and the Step page's on-request view of what one decoding step relied on."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from attnscope.engine.agreement import best_layer, layer_agreement
from attnscope.engine.alignment import align, cross_map
from attnscope.engine.attribution import ATTENTION, INTEGRATED, NORM, VALUE_ZEROING, SentenceAttribution, attribute
from attnscope.engine.dataset import attributions_over, head_stats_batched
from attnscope.engine.step_attribution import StepAttributions, step_attributions
from attnscope.engine.translator import Translation, Translator
from attnscope.training.data import DataError, sample_pairs
from attnscope.ui import selection, tables, widgets
from attnscope.ui.query import Query, QueryKey
from attnscope.ui.text import plain
from attnscope.viz.attribution import alignment_figure, layer_agreement_figure

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd

MAX_SAMPLE = 100  # sentences for the layer comparison: each needs value zeroing and gradients
MAX_STATS_SAMPLE = 1000  # head statistics come from batched capture: 1,000 sentences take seconds
SPLITS = ("test_2016_flickr", "val", "test_2017_flickr")
STEP_TOP = 3  # source tokens listed per method for one step
IG_DONE = "_attr_ig"  # session key: (sentence key, steps) of the last attribution computed with integrated gradients

EXPLANATIONS = """
**Raw attention.** The softmax weights of cross-attention: how strongly a decoder query looks at each
source token. A weight is where a head looks, not what it passes on (Vaswani et al., "Attention Is All You Need", 2017).

**Norm-based attention** (Kobayashi et al., "Attention is Not Only a Weight: Analyzing Transformers with Vector
Norms", EMNLP 2020). Each weight is multiplied by the norm of what the head actually adds for that token (its value
vector through the head's slice of the output projection), so a 0.9 weight on a near-zero vector counts for little.

**Value zeroing** (Mohebbi et al., "Quantifying Context Mixing in Transformers", EACL 2023). A token's value vectors
are zeroed in one layer and the change of every output representation (cosine distance) is its share; shares are
composed over layers (rollout), so each generated token's source and prefix shares sum to one.

**Gradient × input.** The gradient of the generated token's log-probability with respect to each input token
embedding, times that embedding: a first-order estimate of how much the token mattered (Shrikumar et al., 2017).

**Integrated gradients** (Sundararajan et al., "Axiomatic Attribution for Deep Networks", ICML 2017). Gradients are
averaged along the path from zero embeddings to the real ones; the attributions then add up to the log-probability's
change along that path, with more steps giving a closer sum.

**Word alignment** (Garg et al., "Jointly Learning to Align and Translate with Transformer Models", EMNLP 2019).
Each generated word is linked to the source word its cross-attention favours (subword pieces merged into words);
words whose strongest pull is \\<eos\\> stay unlinked. Links download in Pharaoh "i-j" format (source word i, target word j).
"""

WHY_VALUE_ZEROING = ("Why value zeroing rather than ALTI+: it can be checked exactly by zeroing the values and "
                     "re-running the model (our tests do), and each variant goes through the layer's real LayerNorm "
                     "and feed-forward modules, where ALTI+ linearises LayerNorm and leaves the feed-forward block out.")


@st.cache_data(max_entries=32, show_spinner="Computing attributions…")
def _attribute(_translator: Translator, _result: Translation, query_key: QueryKey, ig_steps: int) -> SentenceAttribution:
    return attribute(_translator, _result, ig_steps)


def sentence_attribution(tr: Translator, query: Query, result: Translation, ig_steps: int) -> SentenceAttribution:
    """Every attribution of the page's translation, cached per checkpoint, sentence and settings
    (remembered per session, so the Step page can show integrated gradients without computing them)."""
    query.check(tr)
    att = _attribute(tr, result, query.key, ig_steps)
    st.session_state[IG_DONE] = (query.key, ig_steps)
    return att


def alignment_view(tr: Translator, att: SentenceAttribution) -> None:
    """Pick a layer (or the best by agreement with value zeroing on this sentence) and heads; links and download."""
    n_layers, n_heads = att.weights.n_layers("cross"), att.weights.n_heads
    sample = st.session_state.get("attr_layers")
    if sample and sample[0] == tr.cache_key:  # the Dataset tab's comparison, when it was run for this model
        best, basis = best_layer(sample[2], VALUE_ZEROING), f"over {sample[1]} sentences"
    else:
        best, basis = best_layer(layer_agreement([att]), VALUE_ZEROING), "on this sentence"
    cols = st.columns(2)
    label = f"best by agreement with value zeroing {basis} (layer {best})"
    choice = cols[0].selectbox("Layer", ["best", *range(n_layers)], key="align_layer",
                               format_func=lambda o: label if isinstance(o, str) else f"layer {o}")
    layer = best if isinstance(choice, str) else int(choice)
    heads = cols[1].multiselect("Heads (none: mean of all)", list(range(n_heads)), key="align_heads")
    alignment = align(cross_map(att.weights, layer, heads or None), att.source_tokens, att.output_tokens)
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


def dataset_comparison(tr: Translator) -> None:
    """Layer × method agreement, and batched head statistics, over a sample of sentences."""
    cols = st.columns(4)
    split = cols[0].selectbox("Split", SPLITS, key="attr_split")
    n = cols[1].number_input(f"Sentences (layer comparison max {MAX_SAMPLE})", 1, MAX_STATS_SAMPLE, 20, key="attr_n")
    steps = cols[2].number_input("IG steps (0: skip IG)", 0, 256, 0, key="attr_ig")
    pasted = st.text_area("…or paste sentences, one per line (used instead of the split)", key="attr_pasted", height=80)
    if cols[3].button("Compare layers", key="attr_go"):
        texts = _sample(tr, split, min(int(n), MAX_SAMPLE), pasted)
        if texts:
            bar = st.progress(0.0, text="Attributing…")
            atts = attributions_over(tr, texts, int(steps) or None,
                                     lambda i, total: bar.progress(i / total, text=f"{i}/{total} sentences"))
            if atts:
                st.session_state["attr_layers"] = (tr.cache_key, len(atts), layer_agreement(atts))
    if cols[3].button("Head statistics", key="attr_stats_go"):
        texts = _sample(tr, split, int(n), pasted)
        if texts:
            bar = st.progress(0.0, text="Translating in batches…")
            frame = head_stats_batched(tr, texts, progress=lambda i, total: bar.progress(i / total, text=f"{i}/{total}"))
            st.session_state["attr_stats"] = (tr.cache_key, len(texts), frame)
    saved = st.session_state.get("attr_layers")
    if saved and saved[0] == tr.cache_key:
        summary: pd.DataFrame = saved[2]
        widgets.chart(layer_agreement_figure(summary), "attr-layers")
        refs = [r for r in (VALUE_ZEROING, INTEGRATED, "gradient × input") if r in set(summary["reference"])]
        st.markdown(f"Over {saved[1]} sentences, the cross-attention layer that best matches " +
                    "; ".join(f"{r}: **layer {best_layer(summary, r)}**" for r in refs) + ".")
        tables.table(summary.round(3), tables.LAYER_AGREEMENT)
    stats = st.session_state.get("attr_stats")
    if stats and stats[0] == tr.cache_key:
        st.caption(f"Head statistics over {stats[1]} sentences (batched capture)")
        tables.table(stats[2].round(3), tables.HEAD_STATS)


@st.cache_data(max_entries=32, show_spinner="Attributing this translation…")
def _step_attributions(_translator: Translator, _result: Translation, query_key: QueryKey, ig_steps: int,
                       layer: int) -> StepAttributions:
    return step_attributions(_attribute(_translator, _result, query_key, ig_steps), layer)


def _tokens(tokens: tuple[str, ...], top: list[tuple[int, float]], fmt: str) -> str:
    return " · ".join(f"{j} “{plain(tokens[j])}” {value:{fmt}}" for j, value in top)


def _split_markdown(s: StepAttributions, t: int) -> str:
    share = float(s.source_share[t])
    prefix = _tokens(s.prefix_tokens, s.top(s.prefix[:, : t + 1], t, 2), ".1%")  # step t reads inputs 0..t
    return (f"**Step {t} → “{plain(s.output_tokens[t])}”** drew **{share:.0%}** on the source and **{1 - share:.0%}** "
            f"on the target prefix (most: {prefix}) — value zeroing, Mohebbi et al., EACL 2023.")


def _methods_markdown(s: StepAttributions, t: int, ig_steps: int) -> str:
    rows = [f"| method | top source tokens | Spearman with {s.reference} | same top token |", "|---|---|---|---|"]
    named = {ATTENTION: f"{ATTENTION} (layer {s.layer})", NORM: f"{NORM} (layer {s.layer})",
             INTEGRATED: f"{INTEGRATED} ({ig_steps} steps)"}
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
    """On request, what decoding step `t` relied on: its source/prefix split (value zeroing), the top source
    tokens by each method and their agreement with value zeroing. The sentence is attributed once (cached);
    moving between steps only slices it. Integrated gradients join once computed on the Attribution page."""
    if not st.toggle("Show what this step relied on (attribution)", key="step_attr"):
        return
    done = st.session_state.get(IG_DONE)
    query.check(tr)
    ig_steps = done[1] if done and done[0] == query.key else 0
    s = _step_attributions(tr, result, query.key, ig_steps, selection.layer(result.attention, "cross"))
    st.markdown(_split_markdown(s, t))
    st.markdown(_methods_markdown(s, t, ig_steps))
    st.caption("Scores over the source tokens (position, token, score): in the sidebar's layer, cross-attention weights "
               "(mean of heads) and norm-based attention (the heads' summed vectors, Kobayashi et al., EMNLP 2020); "
               "value-zeroing shares; gradient magnitudes (Shrikumar et al. 2017; integrated gradients, Sundararajan "
               "et al., ICML 2017). "
               + ("" if ig_steps else "Integrated gradients appear here once computed on the Attribution page. ")
               + "Agreement is over this token's source scores; the Attribution page explains each measure.")
