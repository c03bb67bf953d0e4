"""The Head atlas page: every head's queries and keys over a sample of sentences, each head in one joint map
(engine/analysis/atlas.py), drawn and answered in the browser by the explorer (viz/atlas.py's payload).

The sample is computed on request, in batches, sentence by sentence (ui/sample_runs.py: an estimate first,
progress, Stop keeps the finished sentences, more sentences continue the run); the vectors and the atlas built
from them are kept for the session. A click on a point opens its sentence on the Heads or Translate page with
that kind, layer and head selected (the session's view, which the URL follows).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from attnscope.engine.analysis.atlas import (
    BATCH,
    DEFAULT_SENTENCES,
    MAX_SENTENCES,
    SentenceVectors,
    atlas,
    vectors_each,
)
from attnscope.engine.analysis.atlas_types import GROUP_RULES
from attnscope.engine.analysis.projection import NORMALISATION
from attnscope.engine.decoding.translator import Translator
from attnscope.records.attention import KINDS
from attnscope.ui import navigation, sample_runs, state, tables
from attnscope.ui.explorer import atlas_explorer, view_id
from attnscope.ui.state import ViewState
from attnscope.viz.atlas import atlas_payload
from attnscope.viz.explorer import Selection

if TYPE_CHECKING:  # pandas (~70 MB, ~0.5 s) is imported only when a table is asked for
    import pandas as pd

SPLITS = ("val", "test_2016_flickr", "test_2017_flickr")
KEY = "explorer-atlas"
# The sample run under way, the last map drawn (its name and data), and whether a click just opened a point.
RUN, MAP, OPENED = state.Key("_atlas_run"), state.Key("_atlas_map"), state.Key("_atlas_opened")
OPEN_ON = ("Heads & layers", "Translate")  # the pages a clicked point can open on, by their menu titles
GROUP_HELP = " · ".join(f"{group}: {rule}" for group, rule in GROUP_RULES.items())
GROUP_COLUMNS = {**tables.HEAD_STATS, "group": tables.Column("group", GROUP_HELP)}


def _open(sentences: list[str]) -> None:
    """The explorer's callback on a click on a point: its sentence, kind, layer, head and step become the view."""
    picked = state.component_value(KEY, "open")
    if not isinstance(picked, dict) or not isinstance(picked.get("sentence"), int):
        return
    if not 0 <= picked["sentence"] < len(sentences) or picked.get("kind") not in KINDS:
        return
    state.set_sentence(sentences[picked["sentence"]])
    state.set_kind(picked["kind"])
    for name, setter in (("layer", state.set_layer), ("head", state.set_head), ("step", state.set_step)):
        if isinstance(picked.get(name), int):
            setter(picked[name])
    state.store(OPENED, True)


def _built(run: sample_runs.SampleRun, n: int, sentences: list[str],
           view: ViewState) -> tuple[bytes, list[str], pd.DataFrame]:
    """(payload, the mapped sentences' texts, groups) of the first `n` sentences that finished, kept for the session
    (the same bytes on every rerun: Streamlit does not send them to the browser again)."""
    done = tuple(i for i in sorted(run.results) if i < n and run.results[i] is not None)
    name = (run.key, done)
    kept = state.stored(MAP)
    if kept is not None and kept[0] == name:
        return kept[1]
    vectors: list[tuple[int, SentenceVectors]] = [(i, run.results[i]) for i in done]
    with st.spinner("Projecting every head…"):
        mapped = atlas(vectors)
    texts = [sentences[i] for i in done]
    selection = Selection(view.kind, view.layer, view.head or 0)
    data = atlas_payload(mapped, texts, view_id=view_id(name), selection=selection)
    state.store(MAP, (name, (data, texts, mapped.groups)))
    return data, texts, mapped.groups


def atlas_view(tr: Translator, view: ViewState) -> None:
    """The sample's settings, the run (estimate, progress, Stop), then the atlas and the heads' groups."""
    cols = st.columns(3)
    split = cols[0].selectbox("Split", SPLITS, key="atlas_split")
    n = int(cols[1].number_input(f"Sentences (max {MAX_SENTENCES})", 1, MAX_SENTENCES, DEFAULT_SENTENCES,
                                 key="atlas_n"))
    target = cols[2].selectbox("A click on a point opens it on", list(OPEN_ON), key="atlas_open_on")
    pasted = st.text_area("…or paste sentences, one per line (used instead of the split)", key="atlas_pasted",
                          height=80)
    sentences = sample_runs.sample_sentences(tr, split, n, pasted)
    if not sentences:
        return
    sample = tuple(line for line in pasted.splitlines() if line.strip()) or split
    run = sample_runs.sample_run(RUN, (tr.cache_key, view.rules, sample), BATCH)
    sample_runs.controls(run, sentences, lambda chunk: vectors_each(tr, chunk, len(chunk)), "Map every head",
                         "atlas_go", timed=8)
    if not run.started or not run.finished(len(sentences)):
        st.caption("Each head's queries and keys of every sentence (greedy translation, teacher-forced once more with "
                   "every attention call traced), projected into one map per head.")
        return
    data, texts, groups = _built(run, len(sentences), sentences, view)
    of = f" of {len(sentences)}" if run.todo(len(sentences)) else ""
    st.caption(f"{len(texts)}{of} sentences. Projection: {NORMALISATION} Close points score high together when "
               "their norms are alike. Drag to pan, wheel or +/− to zoom, hover for a point's token; click a point "
               "to open its sentence with that head.")
    atlas_explorer(data, KEY, on_open=lambda: _open(texts))
    if state.forget(OPENED):
        st.switch_page(navigation.script(target))
    with st.expander("Groups of heads (what their statistics measure, averaged over the sample)"):
        tables.table(groups.round(3), GROUP_COLUMNS)
