"""Widgets of the step-through page: the step view (a fragment), forcing a token, the beam tree.

Moving through the steps reruns only the step fragment, and its views come from
`ui.figures` (built once per step) as HTML, so a click redraws four light views instead of the page.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

import streamlit as st
from streamlit.errors import StreamlitAPIException

from attnscope.engine.decoding.beam_result import BeamResult
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.ui import figures, results, selection, state, widgets
from attnscope.ui.attribution.sentence import step_contributions
from attnscope.ui.cache import result_key
from attnscope.ui.persist import keep
from attnscope.ui.query import Query
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain
from attnscope.ui.url import write_url
from attnscope.ui.values_switch import values_switch
from attnscope.viz.beam_tree import beam_tree, hypothesis_nodes

PLAY_SECONDS = 0.6  # pause between steps while playing


def _move(delta: int, n: int) -> None:
    view = state.read()
    state.set_step(selection.fit_step(replace(view, step=view.step + delta), n))


def _toggle_play(n: int) -> None:
    view = state.read()
    state.set_playing(not view.playing)
    if not view.playing and view.step >= n - 1:
        state.set_step(0)


def step_controls(view: ViewState, n_steps: int) -> int:
    """Slider plus previous / next / play; returns the current step (kept as the view's `step`)."""
    current = selection.fit_step(view, n_steps)
    state.set_step(current)
    cols = st.columns([1, 1, 1, 6])
    cols[0].button("◀ Previous", on_click=_move, args=(-1, n_steps), disabled=current == 0, key="prev")
    cols[1].button("Next ▶", on_click=_move, args=(1, n_steps), disabled=current >= n_steps - 1, key="next")
    playing = view.playing
    cols[2].button("Pause" if playing else "Play", icon=":material/pause:" if playing else ":material/play_arrow:",
                   on_click=_toggle_play, args=(n_steps,), key="play")
    if n_steps > 1:
        with cols[3]:
            st.slider("Step", 0, n_steps - 1, **keep(state.STEP, current))
    return current


@st.fragment
def step_view(tr: Translator, query: Query, result: Translation) -> None:
    """Controls and figures of the current step; reruns on its own when the step changes (and reads the view again)."""
    view = state.read()
    n = len(result.steps)
    t = step_controls(view, n)
    step = result.steps[t]
    prefix = " ".join(result.target_tokens[: t + 1])
    st.markdown(f"**Decoder input so far:** {plain(prefix)} → **chose** “{plain(step.token)}” with probability {step.prob:.3f}")
    st.caption(f"Full translation: {plain(result.text)}")
    record, norms = values_switch(tr, query, result)  # weights, or weighted value norms
    key = result_key("translate", query)
    shown = figures.step_views(result, record, key, t, selection.layer(view, record, "cross"), selection.head(view), norms)
    st.html(shown.source)
    left, right = st.columns([2, 3])
    with left:
        st.html(shown.top_k)
    with right:
        st.html(shown.cross)
    st.html(shown.self_)
    step_contributions(tr, view, query, result, t)  # on request only: a toggle, off by default
    if query.beam == 1:
        force_branch(tr, view, query, result, t)
    else:
        state.set_force(None)  # a beam search forces nothing
    write_url((state.STEP, state.FORCE))
    if view.playing:
        if t < n - 1:
            time.sleep(PLAY_SECONDS)
            state.set_step(t + 1)
        else:
            state.set_playing(False)
        _redraw()


def _redraw() -> None:
    """Run the step fragment again (the whole page when this run was a full one, e.g. a sidebar change)."""
    try:
        st.rerun(scope="fragment")
    except StreamlitAPIException:  # scope="fragment" is only allowed inside a fragment rerun
        st.rerun()


def _keep_one(filled: str, other: str, empty: object) -> None:
    """Filling one way of forcing a token empties the other, so the page never holds two choices."""
    if state.stored(filled):
        state.store(other, empty)


def forced_choice(tr: Translator, rivals: list[tuple[str, int]], choice: str | None, typed: str) -> tuple[list[int], str]:
    """The ids to force and a sentence saying what they are; no ids (and why) when nothing usable is chosen."""
    codec = tr.bundle.tgt_codec
    if typed.strip():
        ids = codec.encode(typed.strip())
        pieces = " ".join(plain(codec.piece(i)) for i in ids)
        if not ids or tr.model.config.unk_id in ids:
            return [], (f"“{plain(typed.strip())}” is not in the target vocabulary (its pieces: {pieces or 'none'}): "
                        "pick a rival or type another word.")
        return ids, f"Forcing the typed word “{plain(typed.strip())}” ({len(ids)} piece{'s' * (len(ids) > 1)}: {pieces})."
    if choice is not None and choice in dict(rivals):
        return [dict(rivals)[choice]], f"Forcing the rival “{plain(choice)}”."
    return [], "Pick a rival token or type a word to see how the translation would continue."


def force_branch(tr: Translator, view: ViewState, query: Query, result: Translation, t: int) -> None:
    """“Force another token here”: decode on from a different choice, once the user picks one.

    The boxes are keyed by step, so a choice made at one step never carries over to another; filling one
    empties the other. The choice is the view's `force` (so the URL keeps it); a shared URL's choice
    (state.URL_FORCE) fills the picker when it names a rival, else the word box.
    """
    st.subheader(f"What if step {t} chose something else?")
    step = result.steps[t]
    # <pad> and <bos> are never outputs; forcing them would decode to nothing visible
    never = (tr.model.config.pad_id, tr.model.config.bos_id)
    rivals = [(tok, i) for (tok, _), i in zip(step.top_k, step.top_ids) if tok != step.token and i not in never]
    choice_key, typed_key = state.force_boxes(t)
    shared = state.forget(state.URL_FORCE)
    if shared:
        state.store(choice_key if shared in dict(rivals) else typed_key, shared)
    cols = st.columns([2, 2, 1])
    choice = cols[0].selectbox("A top-k candidate", [tok for tok, _ in rivals], index=None, placeholder="Pick a rival token",
                               key=choice_key, on_change=_keep_one, args=(choice_key, typed_key, ""))
    typed = cols[1].text_input("…or type a word", key=typed_key, max_chars=100,
                               on_change=_keep_one, args=(typed_key, choice_key, None))
    forced_ids, said = forced_choice(tr, rivals, choice, typed)
    state.set_force((typed.strip() or choice) if forced_ids else None)
    if not forced_ids:
        (st.warning if typed.strip() else st.caption)(said)
        return
    st.caption(said)
    branch = results.force(tr, query, tuple(result.target_ids[:t]) + tuple(forced_ids))
    if branch is None:
        return
    layer, head = selection.layer(view, result.attention, "cross"), selection.head(view)
    left, right = st.columns(2)
    with left:
        st.markdown(f"**Model's choice:** {plain(result.text)}")
        widgets.chart(figures.heatmap(result, result.attention, result_key("translate", query), "cross", layer, head),
                      "branch-original")
    with right:
        st.markdown(f"**Forced branch:** {plain(branch.text)}")
        key = result_key("force", query, tuple(forced_ids), t)
        widgets.chart(figures.heatmap(branch, branch.attention, key, "cross", selection.layer(view, branch.attention, "cross"),
                                      head),
                      "branch-forced")
    st.caption(whole_output_caption(result, branch))


def whole_output_caption(result: Translation, branch: Translation) -> str:
    """The two outputs' log-probabilities: sums over their tokens, and per token (the beam search's score)."""
    def both(t: Translation) -> str:
        n = len(t.target_ids)
        return f"{t.log_prob:.2f} over {n} tokens ({t.log_prob / max(n, 1):.3f} per token)"
    return (f"Log-probability of the whole output, the sum over its tokens (not divided by its length; a beam search's "
            f"score is the per-token one): model's choice {both(result)}, forced branch {both(branch)}.")


def hypothesis_labels(beam: BeamResult, decode: Callable[[list[int]], str]) -> list[str]:
    """“1. text (score …: log-probability … ÷ n tokens)” per hypothesis: the score is normalised by length,
    the log-probability is the sum. A wide beam can keep the empty output (<eos> chosen at the first step: its
    score is its one log-probability); it is named, not blank."""
    return [f"{i + 1}. {decode(ids) or '(empty output: the model ended at once)'}  "
            f"(score {score:.3f}: log-probability {log_prob:.2f} ÷ {len(ids)} token{'s' * (len(ids) > 1)})"
            for i, (ids, score, log_prob) in enumerate(beam.hypotheses)]


def beam_view(tr: Translator, view: ViewState, query: Query, result: Translation) -> None:
    """The beam search tree (best paths first, more on request) and the attention of any hypothesis."""
    beam = result.beam
    if beam is None:
        return
    st.subheader("Beam search")
    codec = tr.bundle.tgt_codec
    labels = hypothesis_labels(beam, codec.decode)
    # keyed by the beam search itself: another beam size or sentence is another list, never stale labels
    pick = st.selectbox("Hypothesis", range(len(labels)), format_func=lambda i: labels[i],
                        key=f"hypothesis-{hash(query.key)}")
    ids = beam.hypotheses[pick][0]
    cols = st.columns(2)
    top = cols[0].slider("Hypotheses whose paths are drawn", 1, len(labels), min(3, len(labels)),
                     key=f"beam_top-{len(labels)}")
    pruned = cols[1].toggle("Show pruned branches", key="beam_pruned")
    widgets.chart(beam_tree(beam, codec.piece, highlight=hypothesis_nodes(beam)[pick], top=top, show_pruned=pruned), "beam-tree")
    chosen = results.hypothesis(tr, query, tuple(ids))
    layer = selection.layer(view, chosen.attention, "cross")
    key = result_key("hypothesis", query, tuple(ids))
    widgets.chart(figures.heatmap(chosen, chosen.attention, key, "cross", layer, selection.head(view)), "beam-hypothesis")
