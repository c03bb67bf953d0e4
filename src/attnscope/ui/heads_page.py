"""The Heads & layers page: the grid of heads, and tabs of statistics, comparisons, ablation and rollout."""
from __future__ import annotations

import streamlit as st

from attnscope.engine.analysis.dataset import head_stats_batched
from attnscope.engine.analysis.heads import (
    ablate_sentence,
    ablation_bleu,
    head_stats,
    head_stats_delta,
    rollout,
    source_alignment,
)
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.records.attention import KINDS
from attnscope.training.data import DataError, sample_pairs
from attnscope.ui import figures, models, results, state, tables, widgets
from attnscope.ui.attribution.sentence import MAX_STATS_SAMPLE
from attnscope.ui.cache import cached
from attnscope.ui.explorer import explorer
from attnscope.ui.query import Query
from attnscope.ui.selection import KIND_LABELS
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain
from attnscope.ui.translation_view import show_translation
from attnscope.ui.url import tabs_in_url
from attnscope.viz.explorer import Compared
from attnscope.viz.heatmap import attention_heatmap

MAX_SAMPLE = 200  # sentences for the ablation BLEU: translated twice, keeps a CPU-only run under a minute or two
SPLITS = ("val", "test_2016_flickr", "test_2017_flickr")
# The session keys of this page: its open tab (in the URL), the last sample statistics and the last BLEU change.
TAB, SPLIT_STATS, ABLATE_BLEU = state.Key("heads_tab"), state.Key("split_stats"), state.Key("ablate_bleu")

TABS = ("Head statistics", "Compare", "Ablation", "Rollout")


def show(tr: Translator) -> None:
    """The page: the sentence's translation, every head in the explorer, then the open tab (only it is computed and
    drawn, so a rerun after a pick in the explorer stays light in the browser too)."""
    view = state.read()
    query, result = widgets.translated_sentence(tr, view)
    show_translation(query.sentence, result.text, tr.bundle.tgt_lang)
    all_heads(view, query, result)
    stats, compare, ablate, roll = tabs_in_url(list(TABS), TAB, on_change="rerun")
    if stats.open:
        with stats:
            st.caption(f"{KIND_LABELS['encoder']}, {KIND_LABELS['decoder'].lower()} and cross-attention heads for this "
                       "sentence. Click a column header to sort; hover over a header for what the column measures.")
            statistics(result)
            split_statistics(tr)
    if compare.open:
        with compare:
            comparison(tr, view, query, result)
    if ablate.open:
        with ablate:
            ablation(tr, query, result)
    if roll.open:
        with roll:
            rollout_view(result)


def all_heads(view: ViewState, query: Query, result: Translation) -> None:
    """Every layer and head of each kind at once, one of them large, in the attention explorer (answered in the
    browser; a long sentence coloured per head, as on Translate, so no pattern fades)."""
    explorer(result.attention, view, ("heads", query.key), "explorer-heads", steps=result.steps,
             per_head_scale=figures.scaled_per_head(result.attention))


def statistics(result: Translation) -> None:
    """Head statistics of this sentence, a row per head of every kind."""
    tables.table(head_stats(result.attention).round(3), tables.HEAD_STATS)


def _pairs(tr: Translator, split: str, n: int) -> list[tuple[str, str]] | None:
    try:
        return sample_pairs(tr.bundle.src_lang, tr.bundle.tgt_lang, split, n)
    except DataError as err:
        st.warning(plain(err))
        return None


def split_statistics(tr: Translator) -> None:
    st.markdown("**Averaged over a sample of a Multi30k split**")
    cols = st.columns(3)
    split = cols[0].selectbox("Split", SPLITS, key="stats_split")
    n = cols[1].number_input(f"Sentences (max {MAX_STATS_SAMPLE})", 1, MAX_STATS_SAMPLE, 20, key="stats_n")
    if cols[2].button("Compute", key="stats_go"):
        pairs = _pairs(tr, split, int(n))
        if pairs:
            bar = st.progress(0.0, text="Translating in batches…")
            frame = head_stats_batched(tr, [s for s, _ in pairs],
                                       progress=lambda i, total: bar.progress(i / total, text=f"{i}/{total} sentences"))
            state.store(SPLIT_STATS, (tr.cache_key, split, len(pairs), frame))
    saved = state.stored(SPLIT_STATS)
    if saved and saved[0] == tr.cache_key:
        st.caption(f"{saved[2]} sentences of {saved[1]}")
        tables.table(saved[3].round(3), tables.HEAD_STATS)


def same_pair_checkpoints(tr: Translator) -> list[str]:
    """Other checkpoints that translate the same language pair (the only ones a comparison makes sense for)."""
    pair = (tr.bundle.src_lang, tr.bundle.tgt_lang)
    return [name for name, e in models.entries().items()
            if name != tr.name and (e.bundle.src_lang, e.bundle.tgt_lang) == pair]


def comparison(tr: Translator, view: ViewState, query: Query, result: Translation) -> None:
    """Two heads/layers of this sentence, this sentence vs another, or two checkpoints, with their difference: A is
    the view's kind, layer and head; the maps, B's picks and the difference are drawn and answered in the browser."""
    mode = st.radio("Compare", ["two heads or layers", "two sentences", "two checkpoints"], horizontal=True, key="cmp_mode")
    name: tuple[object, ...] = ("compare", query.key, mode)
    if mode == "two heads or layers":
        other = Compared("heads", "this sentence")
    elif mode == "two sentences":
        text = st.text_input("Second sentence", "A little boy climbs into a wooden playhouse.", key="cmp_sentence")
        second = results.translate(tr, Query.of(tr, text, task_prefix=query.task_prefix))
        if second is None:
            return
        cols = st.columns(2)
        cols[0].markdown(f"**A:** {plain(result.text)}")
        cols[1].markdown(f"**B:** {plain(second.text)}")
        other = Compared("sentences", "this sentence", "the second sentence", second.attention, second.output_tokens)
        name = (*name, text)
    else:
        names = same_pair_checkpoints(tr)
        if not names:
            st.info(f"No other checkpoint translates {tr.bundle.src_lang}→{tr.bundle.tgt_lang}. Only checkpoints of the "
                    "same language pair are compared: a model of another pair would be forced to read text it was never "
                    "trained on. Add one on the Checkpoints page (or train one on the Train page).")
            return
        other_tr = models.translator(st.selectbox("Second checkpoint (same language pair)", names, key="cmp_ckpt"))
        if other_tr is None:
            return
        second = results.score(other_tr, query.on(other_tr), result.text)  # same output text, teacher-forced
        own = results.translate(other_tr, Query.of(other_tr, query.sentence))
        if second is None or own is None:
            return
        cols = st.columns(2)
        cols[0].markdown(f"**{plain(tr.name)}:** {plain(result.text)}")
        cols[1].markdown(f"**{plain(other_tr.name)}:** {plain(own.text)}")
        st.caption("For the maps and statistics below, the second checkpoint is teacher-forced on the first one's "
                   "translation, so both read the same target.")
        if result.attention.encoder.shape[:2] == second.attention.encoder.shape[:2]:
            tables.table(head_stats_delta(result.attention, second.attention).round(3), tables.HEAD_STATS_DELTA)
        other = Compared("checkpoints", tr.name, other_tr.name, second.attention, second.output_tokens)
        name = (*name, other_tr.cache_key)
    explorer(result.attention, view, name, "explorer-compare", steps=result.steps, mode="compare", other=other,
             caption=False)


def said(text: str) -> str:
    """`text` as markdown shown literally, or a note that the output is empty (else the label stands alone)."""
    return plain(text) if text.strip() else "*(empty: the output has no words)*"


def ablation(tr: Translator, query: Query, result: Translation) -> None:
    """Switch heads off and see the translation, token probabilities and BLEU change (each kept in the results' cache
    under the query, the heads and, for BLEU, the sample)."""
    c = tr.model.config
    options = [(k, layer, h) for k in KINDS for layer in range(c.n_encoder_layers if k == "encoder" else c.n_decoder_layers)
               for h in range(c.n_heads)]
    chosen = st.multiselect("Heads to switch off", options, key="ablate_heads",
                            format_func=lambda o: f"{o[0]} L{o[1]} H{o[2]}")
    if not chosen:
        st.caption("Pick one or more heads; their outputs are set to zero.")
        return
    heads = tuple(sorted(tuple(h) for h in chosen))
    outcome = cached("ablate", query, lambda: ablate_sentence(tr, query.sentence, heads), heads,
                     spinner="Translating without those heads…")
    st.markdown(f"**With all heads:** {said(outcome.baseline.text)}  \n**Without them:** {said(outcome.ablated.text)}")
    tables.table(outcome.token_changes.round(4), tables.ABLATION_TOKENS)
    cols = st.columns(3)
    split = cols[0].selectbox("BLEU on split", SPLITS, key="ablate_split")
    n = cols[1].number_input(f"Sentences (max {MAX_SAMPLE})", 1, MAX_SAMPLE, 50, key="ablate_n")
    measured_for = (tr.cache_key, heads, split, int(n))  # a BLEU result belongs to exactly these settings
    if cols[2].button("Measure BLEU change", key="ablate_go"):
        pairs = _pairs(tr, split, int(n))
        if pairs:
            bleu = cached("ablation_bleu", query, lambda: ablation_bleu(tr, pairs, heads), split, len(pairs), heads,
                          spinner="Translating with and without the heads…")
            state.store(ABLATE_BLEU, (measured_for, bleu))
    saved = state.stored(ABLATE_BLEU)
    if saved and saved[0] == measured_for:
        import pandas as pd

        tables.table(pd.DataFrame([saved[1]]), tables.ABLATION_BLEU)
    elif saved:
        st.caption("The heads, split or model changed since the last BLEU measurement: measure again.")


def rollout_view(result: Translation) -> None:
    """Encoder rollout (Abnar & Zuidema 2020) and the decoder's composed source alignment."""
    record = result.attention
    rolled = rollout(record)
    layer = st.selectbox("Rollout up to encoder layer", range(len(rolled)), index=len(rolled) - 1, key="rollout_layer")
    cols = st.columns(2)
    with cols[0]:
        widgets.chart(attention_heatmap(rolled[layer], record.source_tokens, record.source_tokens,
                                        title=f"Encoder rollout through layer {layer}", row_title="encoder position",
                                        col_title="input token"), "rollout")
    with cols[1]:
        widgets.chart(attention_heatmap(source_alignment(record), result.output_tokens, record.source_tokens,
                                        title="Decoder source alignment (self-attention ∘ cross-attention)",
                                        row_title="generated token", col_title="source token"), "alignment")
