"""Widgets of the step-through page: the steps in the attention explorer, forcing a token, the beam tree.

Moving through the steps is answered in the browser (ui/explorer.py); the server reruns only when the step the
explorer reports needs something computed (what it relied on, a forced branch).
"""
from __future__ import annotations

from typing import Callable

import streamlit as st

from attnscope.engine.decoding.beam_result import BeamResult
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.ui import results, selection, state, widgets
from attnscope.ui.attribution.sentence import step_contributions
from attnscope.ui.cache import show_held
from attnscope.ui.contrast_view import branches_compared, contrast_view
from attnscope.ui.explorer import explorer
from attnscope.ui.query import Query
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain
from attnscope.ui.url import write_url
from attnscope.ui.values_switch import value_labels, values_switch
from attnscope.viz.beam_tree import beam_tree, hypothesis_nodes


def show(tr: Translator) -> None:
    """The page on the view's sentence: the steps, and the beam search when the view asks for one."""
    view = state.read()
    query, result = widgets.translated_sentence(tr, view)
    step_view(tr, view, query, result)
    if query.beam > 1:
        beam_view(tr, view, query, result)


def force_boxes(step: int) -> tuple[str, str]:
    """The session keys of the two ways of forcing a token at `step`: the rival picker and the typed word."""
    return f"force_choice-{step}", f"force_typed-{step}"


def step_view(tr: Translator, view: ViewState, query: Query, result: Translation) -> None:
    """The decoding steps in the explorer (moving through them, playing and picking heads happen in the browser),
    then what the server computes for the step the view holds: what it relied on, and forcing another token."""
    st.caption(f"Full translation: {plain(result.text)}")
    record, norms = values_switch(tr, query, result)  # weights, or weighted value norms
    explorer(record, view, ("step", query.key, norms), "explorer-step", steps=result.steps, mode="step",
             value=value_labels(norms)[0])
    show_held(result.attention)
    t = selection.fit_step(view, len(result.steps))
    state.set_step(t)  # fitted to this translation, and in the URL
    step_contributions(tr, view, query, result, t)  # on request only: a toggle, off by default
    if query.beam == 1:
        force_branch(tr, view, query, result, t)
    else:
        state.set_force(None)  # a beam search forces nothing
    write_url((state.STEP, state.FORCE))  # at once, as the decoding options do theirs


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
    choice_key, typed_key = force_boxes(t)
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
    cols = st.columns(2)
    cols[0].markdown(f"**Model's choice:** {plain(result.text)}")
    cols[1].markdown(f"**Forced branch:** {plain(branch.text)}")
    branches_compared(view, query, result, branch, t, tuple(forced_ids))
    st.caption(whole_output_caption(result, branch))
    if len(forced_ids) > 1:
        first = plain(tr.bundle.tgt_codec.piece(forced_ids[0]))
        st.caption(f"The contrast below is with the word's first piece, “{first}”: the choice step {t} made "
                   "between them.")
    contrast_view(tr, query, result, t, forced_ids[0])


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
    score is its one log-probability); it is named, not blank. A stopped search's hypotheses still in the beam at
    the stop are said to be unfinished."""
    nodes = hypothesis_nodes(beam) if beam.nodes else []
    unfinished = {i for i, n in enumerate(nodes) if beam.nodes[n].status == "stopped"}
    return [f"{i + 1}. {decode(ids) or '(empty output: the model ended at once)'}  "
            f"({'unfinished, in the beam when stopped; ' * (i in unfinished)}"
            f"score {score:.3f}: log-probability {log_prob:.2f} ÷ {len(ids)} token{'s' * (len(ids) > 1)})"
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
    explorer(chosen.attention, view, ("hypothesis", query.key, tuple(ids)), "explorer-hypothesis", steps=chosen.steps,
             mode="map", kind="cross", title=f"Hypothesis {pick + 1}", caption=False)
