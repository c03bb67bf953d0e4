"""Tables in words a student reads: every column gets a readable name and a one-line help (on hover).

The engine's frames keep their short names (`max_weight`, `bleu_change`: they are what the CSV and the
Python API give); only what the page shows is renamed, here, in one place.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

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
# Model anatomy: the checkpoint's config (one row per setting, its meaning beside it), parameters, tensor shapes.
CONFIG = {
    "field": Column("setting", "The name of the setting in the checkpoint's ModelConfig."),
    "value": Column("value", "This checkpoint's value."),
    "meaning": Column("meaning", "What the setting changes in the model."),
}
CONFIG_FIELDS = {
    "src_vocab_size": "How many tokens the source tokenizer knows (rows of the source embedding table).",
    "tgt_vocab_size": "How many tokens the target tokenizer knows: the output layer scores each of them at every step.",
    "d_model": "Width of the residual stream: every token is a vector of this many numbers between sublayers.",
    "n_heads": "Attention heads per attention sublayer; each works in d_model / n_heads dimensions.",
    "n_encoder_layers": "Encoder layers (self-attention + feed-forward), stacked.",
    "n_decoder_layers": "Decoder layers (masked self-attention + cross-attention + feed-forward), stacked.",
    "d_ff": "Width of the feed-forward network's hidden layer inside every layer.",
    "dropout": "Share of values zeroed while training (embeddings, sublayer outputs, feed-forward); off when translating.",
    "attention_dropout": "Share of attention weights zeroed while training, after they are recorded; off when translating.",
    "max_len": "The longest sequence the positional encoding covers.",
    "positional": "How positions are encoded: fixed sinusoids (the paper), a learned table, or relative (T5: no table, "
                  "a learned bias on each attention score by how far the key is from the query).",
    "norm": "Where the norm (LayerNorm or RMSNorm) sits: after each residual addition (post, the paper) or before each "
            "sublayer (pre).",
    "tie_embeddings": "Whether the output layer reuses the target embedding matrix.",
    "share_embeddings": "Whether source and target embeddings are one matrix (one joint vocabulary).",
    "final_norm": "Whether a norm follows each stack (empty: only with pre-LN).",
    "layer_norm": "The norm's formula: LayerNorm as torch computes it, the Annotated Transformer's (unbiased std, eps added "
                  "to the std), or RMS (T5: divided by the root mean square, no mean subtracted, no bias).",
    "norm_eps": "The small number the norm adds so it never divides by zero.",
    "activation": "The feed-forward network's nonlinearity (relu in the paper).",
    "embed_scale": "Whether token embeddings are multiplied by √d_model before the positions are added (section 3.4).",
    "source_framing": "Special tokens around the source: x <eos>, <bos> x <eos>, or x alone.",
    "sinusoid": "How sines and cosines are laid out: in pairs (the paper) or in two halves (Marian, fairseq...).",
    "position_offset": "Position i reads row i + offset of the position table (BART, fairseq).",
    "separate_positions": "Whether the decoder has a learned position table of its own (BART, mBART).",
    "embed_norm": "Whether a norm follows the embedded input of each stack (BART).",
    "qkv_bias": "Whether the query, key and value projections have biases.",
    "decoder_start": "The token the decoder reads first (empty: <bos>).",
    "forced_first": "A token always output first, such as a language code (NLLB, M2M100, mBART-50); empty: none.",
    "suppressed": "Tokens the model never outputs.",
    "source_prefix": "Tokens put before every source sentence, such as a language code.",
    "source_suffix": "Tokens put after every source sentence's <eos>, such as mBART's language code.",
    "relative_buckets": "With relative positions: how many groups of key-query distances get a bias of their own (T5).",
    "relative_max_distance": "With relative positions: distances this long or longer share one bias.",
    "d_head": "Width of each head's queries, keys and values (empty: d_model / n_heads; T5's heads need not add up to d_model).",
    "ffn": "The feed-forward network: two layers (the paper), or gated, the activated first layer times a second (T5 v1.1).",
    "ffn_bias": "Whether the feed-forward layers have biases (T5's have none).",
    "out_bias": "Whether each attention's output projection has a bias (T5's has none).",
    "scale_scores": "Whether attention scores are divided by √d_head before the softmax (T5 does not).",
    "scale_output": "Whether the output layer's input is multiplied by 1/√d_model (T5 v1.0: its output layer is its embedding).",
    "pad_id": "The id of the padding token, which no position attends to.",
    "bos_id": "The id of the token that starts a sentence.",
    "eos_id": "The id of the token that ends a sentence.",
    "unk_id": "The id of the token that stands for a piece the vocabulary lacks.",
}
PARAMETERS = {
    "module": Column("part", "A part of the model: the embeddings, each encoder and decoder layer, the output layer. "
                             "A matrix shared by two parts is counted once, where it is first used."),
    "parameters": Column("parameters", "How many numbers this part learned in training."),
}
SHAPES = {
    "stage": Column("stage", "A point on the way from the sentence's token ids to the next-token scores."),
    "shape": Column("shape", "The tensor's dimensions in symbols: S source tokens, T decoder positions, D = d_model, "
                             "H heads, d_head each head's width (D / H unless the model sets its own), V target vocabulary."),
    "this sentence": Column("this sentence", "The same dimensions for the sentence in the box."),
    "values": Column("values", "How many numbers the tensor holds for this sentence."),
}
LAYER_PARTS = {
    "part": Column("part", "A piece of every encoder or decoder layer."),
    "computes": Column("computes", "What it computes, as this model does."),
    "learns": Column("learns", "The weights it learns (D = d_model, H heads)."),
}
CHECKPOINTS = {
    "name": Column("name", "The checkpoint's name: pick it in the sidebar to use it."),
    "origin": Column("origin", "shipped with attnscope, trained on the Train page, uploaded, or imported."),
    "pair": Column("pair", "Source → target language."),
    "parameters": Column("parameters", "How many numbers the model learned."),
    "layers": Column("layers", "Encoder + decoder layers."),
    "d_model / heads": Column("d_model / heads", "Width of the residual stream / attention heads per sublayer."),
    "positional": Column("positional", "Fixed sinusoidal or learned position encodings."),
    "data": Column("data", "What it was trained on, as the checkpoint records it."),
    "steps": Column("saved at step", "Training updates when this file was saved (empty: not recorded, e.g. an imported model). "
                             "A run keeps the model of its best validation, so a run that went on longer shows the step "
                             "of that validation, not its last step."),
    "val BLEU": Column("val BLEU", "BLEU (0-100) of this file on the validation split: as scored after training where "
                                   "that was done (e.g. an averaged file, beam search), else at its best validation "
                                   "during training (greedy)."),
    "test BLEU": Column("test_2016_flickr BLEU", "BLEU (0-100) on Multi30k's test_2016_flickr split, where measured."),
    "date": Column("date", "When the checkpoint was written."),
    "size MB": Column("size MB", "Size of the file."),
}
VALIDATIONS = {
    "step": Column("step", "Training updates done when the model was validated."),
    "val loss": Column("val loss", "Cross-entropy on the validation sentences: lower is better."),
    "BLEU": Column("BLEU", "BLEU (0-100) of the validation translations against their references: higher is better."),
    "exact (%)": Column("exact (%)", "Share of validation outputs identical to the expected output (toy tasks)."),
    "sample": Column("sample", "The model's translation of the sentence to watch at this validation."),
}

RELATIVE_BUCKETS = {
    "bucket": Column("bucket", "Row of the stack's bias table: every offset in it gets the same bias, per head."),
    "offsets": Column("offsets key − query", "The offsets that share this bucket (≤ / ≥: and every farther offset)."),
    "kind": Column("kind", "exact: one offset of its own (short distances); logarithmic: a range that widens with distance."),
    "count": Column("offsets drawn", "How many of the drawn offsets fall into this bucket."),
}


def config(names: Iterable[str], columns: Mapping[str, Column]) -> dict[str, Any]:
    """Column config giving each of `names` its readable label and its help (on hover)."""
    missing = [c for c in names if c not in columns]
    if missing:
        raise ValueError(f"no readable name for column(s) {missing}; add them to attnscope.ui.tables")
    return {c: st.column_config.Column(columns[c].label, help=columns[c].help) for c in names}


def rows_table(rows: list[dict[str, Any]], columns: Mapping[str, Column]) -> None:
    """A list of dicts as a full-width table, each column explained on hover (the caller builds no frame;
    st.dataframe still converts the rows through pandas)."""
    names = list(dict.fromkeys(k for row in rows for k in row))
    st.dataframe(rows, hide_index=True, width="stretch", column_config=config(names, columns))


def text_table(rows: list[dict[str, Any]], columns: Mapping[str, Column]) -> None:
    """Rows of sentences as a static table whose cells wrap (a dataframe cuts long text at its column's width),
    under the columns' readable names; for tables whose cells explain themselves (no help on hover)."""
    names = list(dict.fromkeys(k for row in rows for k in row))
    config(names, columns)  # every column has a readable name
    st.table([{columns[k].label: v for k, v in row.items()} for row in rows], hide_index=True)


def readable(frame: pd.DataFrame, columns: Mapping[str, Column]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`frame` with its columns renamed to their labels, and the column config that gives each its help."""
    shown = config(frame.columns, columns)
    return frame.rename(columns={c: columns[c].label for c in frame.columns}), {columns[c].label: v for c, v in shown.items()}


def table(frame: pd.DataFrame, columns: Mapping[str, Column]) -> None:
    """`frame` as a full-width table with readable column names, each explained on hover."""
    shown, config = readable(frame, columns)
    st.dataframe(shown, hide_index=True, width="stretch", column_config=config)
