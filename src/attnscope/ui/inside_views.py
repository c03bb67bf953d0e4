"""What the Inside page draws: one head's computation step by step (sections 1-5) and the positional panels (6)."""
from __future__ import annotations

import streamlit as st

from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.model.kinds import KIND_LABELS
from attnscope.ui import inside_tools, state, widgets
from attnscope.ui.inside_tools import Choice, HeadChoice
from attnscope.ui.positional_tools import LAYOUTS
from attnscope.ui.text import plain
from attnscope.viz import inside
from attnscope.viz.lens import lens_table
from attnscope.viz.offsets import offset_fit_curves, rotation_circle, rotation_errors


def head_steps(tr: Translator, result: Translation, choice: Choice, picked: HeadChoice) -> None:
    """Sections 1-5 for the chosen head, step and query token. Its views are HTML (viz/inside.py says why)."""
    step = result.steps[choice.step]
    v = inside_tools.view(tr, result, choice)
    read = " ".join(result.target_tokens[: choice.step + 1])
    st.markdown(f"**{KIND_LABELS[choice.kind]} · layer {choice.layer} · head {choice.head}** "
                f"{'(in place of the mean of heads)' if picked.mean else ''}  \n"
                f"**Step {choice.step}:** the decoder has read {plain(read)} and chose “{plain(step.token)}”. "
                f"**Query:** “{plain(v.query_tokens[v.query])}” (position {v.query}) · {len(v.key_tokens)} keys · "
                f"d_model {v.concat.size} = {v.n_heads} heads × d_k {v.q.size}")
    st.subheader("1 · Where the vectors come from")
    st.html(inside.input_strips(v, embed_norm=tr.model.config.embed_norm))
    st.html(inside.key_input_strips(v))
    st.subheader("2 · Query, keys and their dot products")
    st.html(inside.qk_strips(v))
    st.html(inside.product_strips(v))
    st.subheader("3 · Scale, mask, softmax")
    st.html(inside.score_steps(v))
    st.caption(f"The softmax row equals the row of the attention heatmap recorded while translating, to float32 "
               f"rounding (this page recomputes the sentence in one teacher-forced pass): max |Δ| = "
               f"{v.gap_to(result.attention):.1e}.")
    left, right = st.columns(2)
    with left:
        st.html(inside.mask_matrix(v))
    with right:
        st.html(inside.weight_bars(v))
    st.subheader("4 · What the head gives to the residual stream")
    st.html(inside.value_strips(v))
    st.html(inside.head_slices(v))
    st.html(inside.contribution_strips(v))
    st.html(inside.residual_strips(v))
    st.subheader(f"5 · Logit lens at step {choice.step}")
    st.html(lens_table(inside_tools.lens(tr, result, choice.step), tr.bundle.tgt_codec.piece))


def positional_panels(tr: Translator) -> None:
    """Section 3.5: an offset as a linear map of the positional encoding, checked on this model's table."""
    c = tr.model.config
    st.subheader(f"6 · Positional encodings: offsets as rotations ({c.positional})")
    cols = st.columns(3)
    inside_tools.clamp(state.INSIDE_PE_POSITIONS, 8, c.max_len, min(64, c.max_len))
    n_pos = cols[0].slider("Positions", 8, c.max_len, key=state.INSIDE_PE_POSITIONS)
    inside_tools.clamp(state.INSIDE_PE_OFFSET, 1, n_pos - 1, 3)
    offset = cols[1].number_input("Offset k", 1, n_pos - 1, key=state.INSIDE_PE_OFFSET)
    if c.positional == "sinusoidal":
        inside_tools.clamp(state.INSIDE_PE_PAIR, 0, c.d_model // 2 - 1, 0)
        pair = cols[2].number_input("Frequency pair i", 0, c.d_model // 2 - 1, key=state.INSIDE_PE_PAIR)
        check = inside_tools.rotation(tr, n_pos, int(offset))
        st.caption(f"PE(t+{offset}) computed by rotating each (sin, cos) pair of PE(t) by ω_i·{offset}, against the "
                   f"model's own table for t < {n_pos - offset}: max error {check.max_error:.1e} (float32 rounding). "
                   f"{LAYOUTS[c.sinusoid]}")
        left, right = st.columns(2)
        with left:
            widgets.chart(rotation_circle(check, int(pair)), "inside-rotation")
        with right:
            widgets.chart(rotation_errors(check), "inside-rotation-errors")
    offsets = tuple(range(1, min(16, n_pos - 1) + 1))
    widgets.chart(offset_fit_curves(offsets, inside_tools.fit_errors(tr, n_pos, offsets)), "inside-offset-fit")
    if c.positional == "learned":
        own, sinusoid = inside_tools.fit_errors(tr, n_pos, (int(offset),)).values()
        st.caption(f"Learned encodings have no formula: the curve is the best rotation (orthogonal map) fitted by "
                   f"least squares for each offset, next to sinusoids of the same size, where it is exact. "
                   f"Offset {offset}: relative error {float(own[0]):.2f} here, {float(sinusoid[0]):.1e} for sinusoids.")
