"""Widgets shared by several pages: the sentence box, charts with download settings, data downloads."""
from __future__ import annotations

import json

import plotly.graph_objects as go
import streamlit as st

from attnscope.engine.translator import MAX_BEAM, MAX_CHARS, Translation, Translator
from attnscope.ui import state
from attnscope.ui.text import plain


def sentence_box(tr: Translator) -> str:
    """The sentence being inspected, shared by every page, with example sentences."""
    st.session_state.setdefault("sentence", state.EXAMPLES[0])
    cols = st.columns([4, 1])
    example = cols[1].selectbox("Examples", ["—", *state.EXAMPLES], key="_example")
    if example != "—" and st.session_state.get("_last_example") != example:
        st.session_state["sentence"] = example
    st.session_state["_last_example"] = example
    return cols[0].text_area(f"Sentence ({tr.bundle.src_lang})", max_chars=MAX_CHARS, height=80,
                             help="Press Ctrl+Enter (or click outside) to translate.",
                             **state.keep("sentence", state.EXAMPLES[0]))


def decoding_options(tr: Translator) -> tuple[int, int]:
    """Beam size and maximum output length, shared by the pages that decode."""
    col_beam, col_len = st.columns(2)
    beam = col_beam.number_input(f"Beam size (1 = greedy, max {MAX_BEAM})", 1, MAX_BEAM, **state.keep("beam", 1))
    limit = tr.model.config.max_len
    if st.session_state.get("max_len", 0) > limit:  # a smaller model became active
        st.session_state["max_len"] = limit
    max_len = col_len.number_input("Maximum output tokens", 1, limit, **state.keep("max_len", min(100, limit)))
    return int(beam), int(max_len)


def translated_sentence(tr: Translator) -> tuple[str, int, int, Translation]:
    """Sentence box, decoding options and the cached translation with its notes; stops the page on bad input."""
    text = sentence_box(tr)
    beam, max_len = decoding_options(tr)
    result = state.translate(tr, text, beam, max_len)
    if result is None or not result.steps:
        st.stop()
    for note in result.notes:
        st.info(plain(note))
    return text, beam, max_len, result


def chart(fig: go.Figure, key: str) -> None:
    """A plotly chart whose camera button saves PNG or SVG, as chosen in the sidebar."""
    fmt = st.session_state.get("image_format", "png")
    st.plotly_chart(fig, key=key, width="stretch",
                    config={"toImageButtonOptions": {"format": fmt, "filename": f"attnscope-{key}", "scale": 2}})


def settings(tr: Translator, text: str, beam: int, max_len: int) -> dict[str, object]:
    return {"checkpoint": tr.name, "sentence": text, "beam_size": beam, "max_len": max_len,
            "src_lang": tr.bundle.src_lang, "tgt_lang": tr.bundle.tgt_lang}


def data_downloads(result: Translation, run_settings: dict[str, object], key: str) -> None:
    """CSV (long table), NPZ and JSON of the whole record, with the run settings."""
    record = result.attention
    if record is None:
        return
    extra = {**run_settings, "translation": result.text}
    cols = st.columns(3)
    frame = record.to_frame()
    header = "".join(f"# {k}: {v}\n" for k, v in extra.items())
    cols[0].download_button("Attention as CSV", header + frame.to_csv(index=False), f"attnscope-{key}.csv",
                            "text/csv", key=f"csv-{key}")
    cols[1].download_button("Record as NPZ", record.to_npz(extra), f"attnscope-{key}.npz",
                            "application/octet-stream", key=f"npz-{key}")
    steps = [{"step": s.index, "token": s.token, "prob": s.prob, "top_k": s.top_k} for s in result.steps or []]
    payload = json.loads(record.to_json(extra))
    payload["steps"] = steps
    cols[2].download_button("Record as JSON", json.dumps(payload), f"attnscope-{key}.json", "application/json",
                            key=f"json-{key}")
