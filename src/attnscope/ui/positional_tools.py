"""What the Positional encoding page draws: the paper's sinusoids, then the loaded model's own encodings."""
from __future__ import annotations

import numpy as np
import streamlit as st

from attnscope.engine.decoding.translator import Translator
from attnscope.engine.inside.anatomy import embedding_norms, model_positions
from attnscope.model.config import ModelConfig
from attnscope.model.transformer import sinusoidal_table
from attnscope.ui import widgets
from attnscope.viz.positional import encoding_curves, encoding_heatmap, norms_histogram, offset_profile, similarity_heatmap


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
    """The model's own encodings for the first `n_pos` positions, beside the sinusoids and the token embeddings."""
    c = tr.model.config
    own = model_positions(tr.model, n_pos)
    if c.positional == "sinusoidal":
        st.caption(f"Identical to the table above (max difference {float(np.abs(own - sinusoid).max()):.1e}).")
    left, right = st.columns(2)
    with left:
        widgets.chart(encoding_heatmap(own, title=f"{c.positional.capitalize()}: position × dimension"), "own-heatmap")
    with right:
        widgets.chart(similarity_heatmap(own, title=f"{c.positional.capitalize()}: position similarity"), "own-similarity")
    tokens, positions = embedding_norms(tr.model, n_pos)
    widgets.chart(norms_histogram(tokens, positions, title="Norms of scaled token embeddings vs positional encodings"),
                  "pe-norms")
