"""Widgets shared by several pages: the sentence box, charts with download settings, data downloads."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from attnscope.engine.decoding.domain import input_notes, output_notes, target_language_note, words
from attnscope.engine.decoding.translator import MAX_BEAM, MAX_CHARS, Translation, Translator
from attnscope.engine.recording.record_files import OUTPUT_TOKENS
from attnscope.training.data import SAMPLE_LANGUAGES, SAMPLE_SPLITS, sample_pairs
from attnscope.ui import results, state
from attnscope.ui.live_decode import decode_again
from attnscope.ui.persist import keep
from attnscope.ui.query import Query
from attnscope.ui.state import ViewState
from attnscope.ui.text import plain
from attnscope.ui.translation_view import show_stale_note
from attnscope.ui.url import write_url

if TYPE_CHECKING:
    import pandas as pd
    from streamlit.runtime.uploaded_file_manager import UploadedFile

NO_EXAMPLE = "—"
EXAMPLE = state.Key("_example")  # the sentence box's examples picker
DECODE_AGAIN = state.Key("decode_again")  # a stopped translation's "Decode the whole translation"
MAX_PREFIX = 200  # characters of a task prefix (T5's are a few words)
EXAMPLES = (
    state.DEFAULT_SENTENCE,
    "Two dogs are running through the snow.",
    "A man in a blue shirt is playing the guitar on the street.",
    "The woman with the red hat is reading a book in the park.",
)


def new_upload(label: str, key: str, max_mb: int | None = None) -> UploadedFile | None:
    """The file just put in this uploader, once: None when empty or when this file was already handled.
    `max_mb` is the limit the uploader shows and enforces (default: the server's)."""
    file = st.file_uploader(label, key=key, max_upload_size=max_mb)
    if file is None or state.stored(state.handled_upload(key)) == (file.name, file.size):
        return None
    state.store(state.handled_upload(key), (file.name, file.size))
    return file


def forget_upload(key: str) -> None:
    """Let the same file in uploader `key` be handled again (e.g. after the user closed what it opened)."""
    state.forget(state.handled_upload(key))


def _use_example() -> None:
    """Copy the picked example into the sentence and reset the menu (so it never shows a stale pick)."""
    example = state.stored(EXAMPLE, NO_EXAMPLE)
    if example != NO_EXAMPLE:
        state.set_sentence(example)
    state.store(EXAMPLE, NO_EXAMPLE)


def sentence_box(tr: Translator) -> str:
    """The sentence being inspected, shared by every page, with example sentences."""
    cols = st.columns([4, 1])
    cols[1].selectbox("Examples", [NO_EXAMPLE, *EXAMPLES], key=EXAMPLE, on_change=_use_example)
    # The box commits its text on Ctrl+Enter or a click outside (the button is such a click), and a
    # committed text is translated: the button is where a newcomer looks for that.
    cols[1].button("Translate", key="translate_go", type="primary", icon=":material/translate:", width="stretch")
    sentence = cols[0].text_area(f"Sentence ({tr.bundle.src_lang})", max_chars=MAX_CHARS, height=80,
                                 help="Press Translate or Ctrl+Enter to translate.",
                                 **keep(state.SENTENCE, state.DEFAULT_SENTENCE))
    if tr.bundle.task_prefix or tr.model.config.positional == "relative":  # T5's family reads tasks as text
        cols[0].text_input("Task prefix, added before the sentence", max_chars=MAX_PREFIX, placeholder="none",
                           help="T5 models learn each task from a text put before the input, e.g. \"translate English to "
                                "German: \". The model reads this prefix and your sentence as one text: its tokens start "
                                "the source. The checkpoint's own is filled in; change it to ask for another task.",
                           **keep(state.task_prefix(tr.name), tr.bundle.task_prefix))
    return sentence


def rules_label(name: str) -> str:
    """The radio's label of an imported model's rules named `name` ("fairseq defaults", "the model's
    generation_config"), saying "the model's" once."""
    return "the model's (" + name.removeprefix("the model's ") + ")"


def decoding_options(tr: Translator, view: ViewState) -> None:
    """Beam size, maximum output length (the view's `beam` and `max_len`) and, for a model imported with its
    framework's decoding rules, whose rules decode, with the rules in force in one sentence; shared by the pages
    that decode."""
    col_beam, col_len = st.columns(2)
    col_beam.number_input(f"Beam size (1 = greedy, max {MAX_BEAM})", 1, MAX_BEAM, **keep(state.BEAM, 1))
    model_rules, own = tr.decoding_rules("model"), tr.decoding_rules("attnscope")
    if model_rules != own:
        st.radio("Decoding rules", ("model", "attnscope"), horizontal=True, **keep(state.RULES, "model"),
                 format_func=lambda c: rules_label(model_rules.name) if c == "model" else "attnscope's own",
                 help="An imported model decodes by default as its framework does (its length rule, forced </s>, "
                      "length penalty...); attnscope's own rules decode every model alike.")
    rules = tr.decoding_rules(view.rules)
    limit = tr.model.config.max_len
    if (view.max_len or 0) > limit:  # a smaller model became active
        state.set_max_len(limit)
    auto = "twice the source + 10" if rules == own else "the decoding rules' limit"
    col_len.number_input("Maximum output tokens", 1, limit, placeholder=f"auto: {auto}",
                         help=f"Empty: each sentence gets the decoding rules' limit ({auto}, at most {limit}, this "
                              "model's limit). A number you type is kept for every sentence.",
                         **keep(state.MAX_LEN, None))
    st.caption(plain(rules.sentence()))
    write_url((state.BEAM, state.MAX_LEN))  # at once: a fragment or a page-only rerun skips the app's own URL update


def translated_sentence(tr: Translator, view: ViewState) -> tuple[Query, Translation]:
    """Sentence box, decoding options, the query they hold and its cached translation with its notes;
    stops the page on bad input."""
    sentence_box(tr)
    decoding_options(tr, view)
    query = Query.from_view(tr, view)
    result = results.translate(tr, query)
    if result is None:
        st.stop()
    config = tr.model.config
    ended = () if result.stopped else output_notes(config, result.source_ids, result.target_ids, result.budget,
                                                   query.max_len is not None, tr.decoding_rules(query.rules))
    for note in (*result.notes, *input_notes(tr.bundle.summary, config, result.source_ids), *ended):
        st.info(plain(note))
    if result.stopped:
        st.button("Decode the whole translation", key=DECODE_AGAIN, icon=":material/play_arrow:",
                  on_click=decode_again, help="Decode this sentence again, to its end.")
    if not result.steps:  # stopped before its first token
        st.stop()
    src, tgt = tr.bundle.src_lang, tr.bundle.tgt_lang
    wrong_language = target_language_note(query.sentence, src, tgt, *sample_words(src, tgt))
    if wrong_language:
        st.info(plain(wrong_language), icon=":material/translate:")
    show_stale_note(query.sentence)  # shown while the box holds a sentence not yet translated
    return query, result


@st.cache_resource(max_entries=16, show_spinner=False)
def sample_words(src_lang: str, tgt_lang: str) -> tuple[frozenset[str], frozenset[str]]:
    """Every word of each side of the Multi30k sample embedded in the package (about 2,000 sentences per
    language): the word lists that tell an input in the target language apart. Empty for other languages."""
    if src_lang == tgt_lang or not {src_lang, tgt_lang} <= set(SAMPLE_LANGUAGES):
        return frozenset(), frozenset()
    pairs = [pair for split in SAMPLE_SPLITS for pair in sample_pairs(src_lang, tgt_lang, split)]
    return (frozenset(w for s, _ in pairs for w in words(s)), frozenset(w for _, t in pairs for w in words(t)))


def chart(fig: go.Figure, key: str) -> None:
    """A plotly chart whose camera button saves PNG or SVG, as chosen in the sidebar."""
    fmt = state.stored(state.IMAGE_FORMAT, "png")
    st.plotly_chart(fig, key=key, width="stretch",
                    config={"toImageButtonOptions": {"format": fmt, "filename": f"attnscope-{key}", "scale": 2}})


def settings(tr: Translator, query: Query) -> dict[str, object]:
    """The run settings saved with downloaded data."""
    return {"checkpoint": tr.name, "sentence": query.sentence, "task_prefix": query.task_prefix, "beam_size": query.beam,
            "max_len": query.max_len,
            "src_lang": tr.bundle.src_lang, "tgt_lang": tr.bundle.tgt_lang}


def attention_table(result: Translation) -> pd.DataFrame:
    """The record's long table plus `produced_token`: what the step of each decoder/cross row chose.

    Decoder and cross rows are labelled by the decoder's input (`query_token`: <bos> y1 ..), the
    UI's cross maps by the token each step produced (y1 .. <eos>); the CSV carries both.
    """
    frame = result.attention.to_frame()
    produced = np.asarray(result.output_tokens, dtype=object)
    decoding = (frame["kind"] != "encoder").to_numpy()
    frame["produced_token"] = ""
    frame.loc[decoding, "produced_token"] = produced[frame.loc[decoding, "query_index"].to_numpy()]
    return frame


def data_downloads(result: Translation, run_settings: dict[str, object], key: str) -> None:
    """CSV (long table), NPZ and JSON of the whole record, with the run settings; built only when clicked."""
    record = result.attention
    if record is None:
        return
    extra = {**run_settings, "translation": result.text, **({"stopped": True} if result.stopped else {})}
    header = "".join(f"# {k}: {v}\n" for k, v in extra.items())

    def as_json() -> str:
        payload = json.loads(record.to_json(extra))
        payload["steps"] = [{"step": s.index, "token": s.token, "prob": s.prob, "top_k": s.top_k} for s in result.steps or []]
        return json.dumps(payload)

    cols = st.columns(3)
    cols[0].download_button("Attention as CSV", lambda: header + attention_table(result).to_csv(index=False),
                            f"attnscope-{key}.csv", "text/csv", key=f"csv-{key}")
    produced = {OUTPUT_TOKENS: list(result.output_tokens)}  # so an opened record labels its rows as this page does
    cols[1].download_button("Record as NPZ", lambda: record.to_npz({**extra, **produced}), f"attnscope-{key}.npz",
                            "application/octet-stream", key=f"npz-{key}")
    cols[2].download_button("Record as JSON", as_json, f"attnscope-{key}.json", "application/json", key=f"json-{key}")
