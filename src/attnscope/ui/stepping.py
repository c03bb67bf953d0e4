"""Widgets of the step-through page: step controls, forcing a token, the beam tree."""
from __future__ import annotations

import streamlit as st

from attnscope.engine.translator import Translation, Translator
from attnscope.model.config import BOS_ID, PAD_ID
from attnscope.ui import state, widgets
from attnscope.ui.text import plain
from attnscope.viz.beam_tree import beam_tree
from attnscope.viz.heatmap import record_heatmap


def _move(delta: int, n: int) -> None:
    st.session_state["step"] = max(0, min(n - 1, st.session_state.get("step", 0) + delta))


def step_controls(n_steps: int) -> int:
    """Slider plus previous / next / play; returns the current step (kept in session_state['step'])."""
    current = min(max(int(st.session_state.get("step", 0)), 0), n_steps - 1)
    st.session_state["step"] = current
    cols = st.columns([1, 1, 1, 6])
    cols[0].button("◀ Previous", on_click=_move, args=(-1, n_steps), disabled=current == 0, key="prev")
    cols[1].button("Next ▶", on_click=_move, args=(1, n_steps), disabled=current >= n_steps - 1, key="next")
    if cols[2].button("⏯ Play" if not st.session_state.get("playing") else "⏸ Pause", key="play"):
        st.session_state["playing"] = not st.session_state.get("playing", False)
        if st.session_state["playing"] and current >= n_steps - 1:
            st.session_state["step"] = 0
    if n_steps > 1:
        with cols[3]:
            st.slider("Step", 0, n_steps - 1, **state.keep("step", current))
    return int(st.session_state["step"])


def force_branch(tr: Translator, text: str, result: Translation, t: int, max_len: int) -> None:
    """“Force another token here”: decode on from a different choice and compare the branches."""
    st.subheader(f"What if step {t} chose something else?")
    step = result.steps[t]
    # <pad> and <bos> are never outputs; forcing them would decode to nothing visible
    rivals = [tok for (tok, _), i in zip(step.top_k, step.top_ids) if tok != step.token and i not in (PAD_ID, BOS_ID)]
    cols = st.columns([2, 2, 1])
    choice = cols[0].selectbox("A top-k candidate", rivals, key="force_choice")
    typed = cols[1].text_input("…or type a word", key="force_typed", max_chars=100)
    if typed.strip():
        forced_ids = tr.bundle.tgt_codec.encode(typed.strip())
    else:
        forced_ids = [step.top_ids[[tok for tok, _ in step.top_k].index(choice)]] if choice else []
    if not forced_ids:
        st.info("That word has no pieces in the target vocabulary.")
        return
    branch = state.force(tr, text, tuple(result.target_ids[:t]) + tuple(forced_ids), max_len)
    if branch is None:
        return
    layer = min(st.session_state.get("layer", 0), result.attention.n_layers("cross") - 1)  # both: one model
    left, right = st.columns(2)
    with left:
        st.markdown(f"**Model's choice:** {plain(result.text)}")
        widgets.chart(record_heatmap(result.attention, "cross", layer, None, row_labels=result.output_tokens),
                      "branch-original")
    with right:
        st.markdown(f"**Forced branch:** {plain(branch.text)}")
        widgets.chart(record_heatmap(branch.attention, "cross", layer, None, row_labels=branch.output_tokens),
                      "branch-forced")
    st.caption(f"Log-probability of the whole output: model's choice {result.log_prob:.2f}, forced branch {branch.log_prob:.2f}.")


def beam_view(tr: Translator, text: str, result: Translation) -> None:
    """The beam search tree and the attention of any finished hypothesis."""
    beam = result.beam
    if beam is None:
        return
    st.subheader("Beam search")
    labels = [f"{i + 1}. {tr.bundle.tgt_codec.decode(ids)}  (score {score:.3f})"
              for i, (ids, score, _) in enumerate(beam.hypotheses)]
    pick = st.selectbox("Hypothesis", range(len(labels)), format_func=lambda i: labels[i], key="hypothesis")
    ids = beam.hypotheses[pick][0]
    finished = [n.id for n in beam.nodes if n.status == "finished" and beam.path(n.id) == ids]
    piece = lambda i: tr.bundle.tgt_codec.pieces([i])[0]  # noqa: E731
    widgets.chart(beam_tree(beam, piece, highlight=finished[0] if finished else None), "beam-tree")
    chosen = state.hypothesis(tr, text, tuple(ids))
    layer = min(st.session_state.get("layer", 0), chosen.attention.n_layers("cross") - 1)
    head = st.session_state.get("head", "mean")
    widgets.chart(record_heatmap(chosen.attention, "cross", layer, None if head == "mean" else head,
                                 row_labels=chosen.output_tokens), "beam-hypothesis")
