"""What the Model anatomy page draws from the engine: the config, where the parameters are and every tensor's shape."""
from __future__ import annotations

import dataclasses

import streamlit as st

from attnscope.engine.decoding.translator import Translator
from attnscope.engine.inside.anatomy import layer_parts, parameter_table, shape_walkthrough
from attnscope.model.config import ModelConfig
from attnscope.ui import results, state, tables, widgets
from attnscope.ui.checkpoints.manage import training_facts
from attnscope.ui.query import Query


def show(tr: Translator) -> None:
    """The page: the config, the parameters, what each layer computes, and the shapes for the current sentence."""
    c = tr.model.config
    st.subheader("Config")
    config(c)  # full width: in half a column its meanings were cut to a few letters
    st.subheader("Parameters")
    parameters(tr)
    st.caption(" · ".join(training_facts(tr.bundle.summary)))
    st.subheader("What each layer computes")
    layers(c)
    st.subheader("Tensor shapes for the current sentence")
    widgets.sentence_box(tr)
    result = results.translate(tr, Query.from_view(tr, state.read()))
    if result is not None:
        s, t = len(result.source_tokens), len(result.target_tokens)
        st.markdown(f"S = {s} source tokens, T = {t} decoder positions, D = {c.d_model}, H = {c.n_heads}, d_head = "
                    f"{c.head_dim}{' = D / H' if c.d_head is None else ' (its own width)'}, V = {c.tgt_vocab_size}.")
        shapes(tr, s, t)


def config_rows(c: ModelConfig) -> list[dict[str, str]]:
    """One row per setting of the config: its name, this checkpoint's value and what it changes."""
    return [{"field": f.name, "value": "" if getattr(c, f.name) is None else str(getattr(c, f.name)),
             "meaning": tables.CONFIG_FIELDS[f.name]} for f in dataclasses.fields(c)]


def config(c: ModelConfig) -> None:
    """The checkpoint's config, each setting explained in full (the meanings are sentences: a static table wraps them)."""
    tables.text_table(config_rows(c), tables.CONFIG)


def parameters(tr: Translator) -> None:
    """The total and a row per part of the model."""
    table = parameter_table(tr.model)
    st.metric("Total parameters", f"{int(table['parameters'].sum()):,}")
    tables.table(table, tables.PARAMETERS)


def shapes(tr: Translator, n_source: int, n_target: int) -> None:
    """Every tensor's shape on the way through the model, for a sentence of these lengths."""
    tables.table(shape_walkthrough(tr.model, n_source, n_target), tables.SHAPES)


def layers(c: ModelConfig) -> None:
    """What each piece of a layer computes and learns, as this config builds it (LayerNorm or RMSNorm, dense or gated
    feed-forward, scaled scores or not, biases or none)."""
    tables.text_table(layer_parts(c), tables.LAYER_PARTS)
