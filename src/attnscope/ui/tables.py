"""Tables in words a student reads: every column gets a readable name and a one-line help (on hover).

The engine's frames keep their short names (`max_weight`, `bleu_change`: they are what the CSV and the
Python API give); only what the page shows is renamed, here, in one place.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import streamlit as st

from attnscope.engine.analysis.heads import STAT_DEFINITIONS

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is drawn
    import pandas as pd


@dataclass(frozen=True)
class Column:
    """How the page names one column and what its help says."""

    label: str
    help: str


HEAD_KEYS = {
    "kind": Column("attention", "encoder = encoder self-attention, decoder = decoder masked self-attention, "
                                "cross = cross-attention (decoder → source)."),
    "layer": Column("layer", "Layer number, counting from 0 (nearest the input)."),
    "head": Column("head", "Head number within its layer, counting from 0."),
}
_STAT_LABELS = {
    "entropy": "entropy (nats)", "max_weight": "largest weight", "diagonal": "weight on itself",
    "previous_token": "weight on previous token", "next_token": "weight on next token",
    "bos_share": "share on <bos>", "eos_share": "share on <eos>", "punctuation_share": "share on punctuation",
    "mean_distance": "mean distance (tokens)",
}
HEAD_STATS = {**HEAD_KEYS, **{name: Column(label, STAT_DEFINITIONS[name]) for name, label in _STAT_LABELS.items()}}
# head_stats_delta: each statistic for the first (A) and second (B) checkpoint, and B − A
HEAD_STATS_DELTA = {**HEAD_KEYS, **{
    f"{name}_{side}": Column(f"{label}: {words}", f"{STAT_DEFINITIONS[name]} {explained}")
    for name, label in _STAT_LABELS.items()
    for side, words, explained in (("a", "first", "First checkpoint."), ("b", "second", "Second checkpoint."),
                                   ("delta", "change", "Second minus first."))}}
ABLATION_TOKENS = {
    "step": Column("step", "Decoding step, counting from 0."),
    "token": Column("token", "The token the model chose at this step with all heads on."),
    "prob_before": Column("probability with all heads", "The model's probability of this token with every head on."),
    "prob_after": Column("probability without them", "Its probability with the chosen heads switched off, on the same prefix."),
    "change": Column("change", "Probability without the heads minus with them: negative = the heads helped this token."),
}
ABLATION_BLEU = {
    "bleu_before": Column("BLEU with all heads", "BLEU (0-100) of the sample's translations with every head on."),
    "bleu_after": Column("BLEU without them", "BLEU of the same sentences with the chosen heads switched off."),
    "bleu_change": Column("BLEU change", "BLEU without the heads minus with them: negative = the heads helped."),
    "sentences": Column("sentences", "How many sentences of the split were translated twice."),
}
LAYER_AGREEMENT = {
    "layer": Column("layer", "Decoder layer whose cross-attention is compared."),
    "measure": Column("measure", "Raw attention weights, or norm-based attention (weights × value norms)."),
    "reference": Column("against", "The attribution method the measure is compared with."),
    "spearman": Column("rank correlation (Spearman)", "Mean over tokens of how alike the two rankings of the source "
                                                      "tokens are: 1 = same order, 0 = unrelated."),
    "top1": Column("same top token", "Share of tokens for which both put the same source token first."),
    "tokens": Column("tokens", "Generated tokens compared, over every sentence of the sample."),
}
REFERENCE = {
    "step": Column("step", "Decoding step, counting from 0."),
    "reference token": Column("reference token", "The reference translation's token at this step."),
    "model's probability of it": Column("model's probability of it", "How likely the model found the reference "
                                                                      "token, having read the reference up to here."),
    "model's own choice": Column("model's own choice", "The token the model itself ranked first at this step."),
}


def readable(frame: pd.DataFrame, columns: Mapping[str, Column]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`frame` with its columns renamed to their labels, and the column config that gives each its help."""
    unnamed = [c for c in frame.columns if c not in columns]
    if unnamed:
        raise ValueError(f"no readable name for column(s) {unnamed}; add them to attnscope.ui.tables")
    config = {columns[c].label: st.column_config.Column(columns[c].label, help=columns[c].help) for c in frame.columns}
    return frame.rename(columns={c: columns[c].label for c in frame.columns}), config


def table(frame: pd.DataFrame, columns: Mapping[str, Column]) -> None:
    """`frame` as a full-width table with readable column names, each explained on hover."""
    shown, config = readable(frame, columns)
    st.dataframe(shown, hide_index=True, width="stretch", column_config=config)
