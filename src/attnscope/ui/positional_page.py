"""What the Positional encoding page draws: the paper's sinusoids, then the loaded model's own encodings."""
from __future__ import annotations

import numpy as np
import streamlit as st

from attnscope.engine.decoding.translator import Translator
from attnscope.engine.inside.anatomy import embedding_norms, model_positions
from attnscope.engine.inside.offsets import paired
from attnscope.engine.inside.relative import RelativeBias, relative_bias, shared_from, span
from attnscope.model.config import ModelConfig
from attnscope.model.positions import sinusoidal_table
from attnscope.model.transformer import Transformer
from attnscope.ui import tables, widgets
from attnscope.viz.positional import (
    encoding_curves,
    encoding_heatmap,
    norms_histogram,
    offset_profile,
    relative_bias_heatmap,
    relative_bias_lines,
    similarity_heatmap,
)

# Where a sinusoidal table keeps its sines and cosines (config.sinusoid), said once for every page.
LAYOUTS = {
    "interleaved": "",
    "halves": "This model keeps every sine in the first half of the dimensions and every cosine in the second "
              "([sin | cos] halves, as Marian and OpenNMT-py do): pair i is dimensions i and i + d_model/2.",
    "fairseq": "This model keeps every sine in the first half of the dimensions and every cosine in the second "
               "([sin | cos] halves), with frequencies ω_i = 10000^(−i/(d_model/2−1)) (fairseq, M2M100, NLLB) instead "
               "of the paper's 10000^(−2i/d_model).",
}


def show(tr: Translator) -> None:
    """The page: a relative model's own positions first and the paper's sinusoids after (nothing is added to its
    embeddings); any other model's the other way round, its own encodings compared with the paper's."""
    c = tr.model.config
    st.markdown(introduction(c))
    if c.positional == "relative":
        st.subheader("This model's own positions (relative: a bias on the scores)")
        relative_biases(tr)
        st.subheader("The paper's sinusoids, for comparison")
        paper_sinusoids(c)
    else:
        n_pos, sinusoid = paper_sinusoids(c)
        st.subheader(f"This model's own encodings ({c.positional})")
        model_encodings(tr, n_pos, sinusoid)


def introduction(c: ModelConfig) -> str:
    """What this model adds to each token embedding, as its config says (scaled or not, LayerNorm, offset)."""
    scaled = (f"scaled by √{c.d_model}" if c.embed_scale else
              "not scaled: this model leaves out section 3.4's multiplication by √d_model")
    if c.positional == "relative":
        return ("This model adds nothing to its token embeddings (" + scaled + "): like T5, it learns a bias per head for "
                f"each of {c.relative_buckets} buckets of the distance between key and query, added to the self-attention "
                "scores before the softmax: each head's bias by offset, and which offsets share a bucket, come first; the "
                "paper's sinusoids follow for comparison.")
    text = f"The model adds a {c.d_model}-dimensional vector per position to each token embedding ({scaled})"
    text += "; a LayerNorm follows the sum" if c.embed_norm else ""
    text += f". This checkpoint uses **{c.positional}** positional encodings"
    text += f"; position i reads row i + {c.position_offset} of its table" if c.position_offset else ""
    text += "; the encoder's table is shown below, the decoder has its own" if c.separate_positions else ""
    return text + "."


def comparison(c: ModelConfig, own: np.ndarray, paper: np.ndarray) -> str:
    """How this model's sinusoidal table relates to the paper's (`paper`, interleaved), measured on both."""
    if c.sinusoid == "interleaved":
        return f"Identical to the table above (max difference {float(np.abs(own - paper).max()):.1e})."
    reordered = float(np.abs(paired(own, c.sinusoid) - paper).max())
    if c.sinusoid == "halves":
        return (f"The same sinusoids as above with the dimensions in another order, so the maps differ: {LAYOUTS['halves']} "
                f"Put back into (sin, cos) pairs, it matches the table above to {reordered:.1e}.")
    return f"Not the table above: {LAYOUTS['fairseq']} Even put back into (sin, cos) pairs, it differs by up to {reordered:.1e}."


def paper_sinusoids(c: ModelConfig) -> tuple[int, np.ndarray]:
    """The sinusoidal table for the positions the user picks, drawn as curves, heatmaps and offsets; returns
    (positions, table) for the comparison with the model's own encodings."""
    n_pos = st.slider("Positions shown", 8, c.max_len, min(64, c.max_len), key="pe_positions")
    sinusoid = sinusoidal_table(n_pos, c.d_model).numpy()
    dims = st.multiselect("Dimensions to plot", list(range(c.d_model)),
                          default=sorted({d for d in (0, 1, 4, 5, 16, 64) if d < c.d_model} | {min(64, c.d_model - 1)}),
                          key="pe_dims")
    widgets.chart(encoding_curves(sinusoid, dims, title="Sinusoidal encoding: PE(pos, 2i) = sin(pos/10000^(2i/d)), "
                                                       "PE(pos, 2i+1) = cos(…)"), "pe-curves")
    left, right = st.columns(2)
    with left:
        widgets.chart(encoding_heatmap(sinusoid, title="Sinusoidal: position × dimension"), "pe-heatmap")
    with right:
        widgets.chart(similarity_heatmap(sinusoid, title="Sinusoidal: PE(p) · PE(q) depends only on |p − q|"),
                      "pe-similarity")
    widgets.chart(offset_profile(sinusoid, [0, n_pos // 4, n_pos // 2],
                                 title="Same offset, same dot product, wherever you start"), "pe-offsets")
    return n_pos, sinusoid


def model_encodings(tr: Translator, n_pos: int, sinusoid: np.ndarray) -> None:
    """The model's own encodings for the first `n_pos` positions, beside the sinusoids and the token embeddings (a
    model with relative positions has none: `relative_biases`)."""
    c = tr.model.config
    own = model_positions(tr.model, n_pos)
    if c.positional == "sinusoidal":
        st.caption(comparison(c, own, sinusoid))
    left, right = st.columns(2)
    with left:
        widgets.chart(encoding_heatmap(own, title=f"{c.positional.capitalize()}: position × dimension"), "own-heatmap")
    with right:
        widgets.chart(similarity_heatmap(own, title=f"{c.positional.capitalize()}: position similarity"), "own-similarity")
    tokens, positions = embedding_norms(tr.model, n_pos)
    what = "token embedding × √d_model" if c.embed_scale else "token embedding (not scaled)"
    widgets.chart(norms_histogram(tokens, positions, title=norms_title(c.embed_scale), tokens=what), "pe-norms")


def norms_title(embed_scale: bool) -> str:
    """The norms chart's title, plural on the noun (not on the scale factor or its note)."""
    scaled = "× √d_model" if embed_scale else "(not scaled)"
    return f"Norms of token embeddings {scaled} vs positional encodings"


STACKS = {"encoder": "Encoder self-attention (bidirectional: a key before or after the query)",
          "decoder": "Decoder masked self-attention (causal: only keys up to the query)"}


def shared_note(model: Transformer) -> str:
    """From which offset each stack's bias stops changing, as its bucketing function says (not max_distance)."""
    enc, dec = shared_from(model, "encoder"), shared_from(model, "decoder")
    return (f"from ±{enc} on in the encoder and from −{dec} on in the decoder, every offset shares its direction's "
            "last bucket")


def relative_biases(tr: Translator) -> None:
    """T5's learned bias by offset key − query for each stack, one heatmap (heads × offsets) and a line per head,
    then the buckets the offsets fall into (cross-attention has no position bias)."""
    c, reach = tr.model.config, span(tr.model)
    st.markdown(f"Each self-attention score gets, before the softmax, its head's bias for the bucket of the offset key − "
                f"query: {c.relative_buckets} buckets a stack, from a table in its first layer that every layer adds. "
                f"Offsets up to ±{reach} are drawn; {shared_note(tr.model)}. Cross-attention has no position bias.")
    for stack, label in STACKS.items():
        bias = relative_bias(tr.model, stack, reach)
        st.markdown(f"**{label}**")
        widgets.chart(relative_bias_heatmap(bias.offsets, bias.buckets, bias.bias,
                                            title=f"{stack.capitalize()}: bias by head and offset"), f"rel-{stack}-heatmap")
        widgets.chart(relative_bias_lines(bias.offsets, bias.buckets, bias.bias,
                                          title=f"{stack.capitalize()}: one line per head"), f"rel-{stack}-lines")
        tables.rows_table(bucket_rows(bias), tables.RELATIVE_BUCKETS)


def bucket_rows(bias: RelativeBias) -> list[dict[str, object]]:
    """One row per bucket: the offsets that share it (as relative_bucket assigns them) and whether it is exact."""
    return [{"bucket": r.bucket, "offsets": r.offsets, "kind": "exact" if r.exact else "logarithmic",
             "count": int((bias.buckets == r.bucket).sum())} for r in bias.ranges]
