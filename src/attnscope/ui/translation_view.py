"""The translation as the page's headline, and a note that marks every result as stale while the
sentence box holds other text.

Streamlit hears of an edit only when the box commits it (Ctrl+Enter, the Translate button, or a
click outside), so while the user types, the results below belong to the previous sentence. A small
script watches the box in the browser and, whenever its text differs from the translated sentence,
shows the note (which names that sentence) and dims the results until the new sentence is translated.
"""
from __future__ import annotations

from urllib.parse import quote

import streamlit as st

from attnscope.ui import state
from attnscope.viz.html import esc

BOX = f".st-key-{state.shadow(state.SENTENCE)} textarea"  # the sentence box (widgets.sentence_box keeps it so)
STYLE = (
    "<style>"
    ".attn-translation{margin:.25rem 0 1rem 0}"
    ".attn-translation .lbl{font-size:.875rem;opacity:.75;margin-bottom:.1rem}"
    ".attn-translation .txt{font-size:2.75rem;font-weight:600;line-height:1.25;color:inherit;opacity:1}"
    ".attn-sentence .stale{display:none;border-left:4px solid #d97706;background:rgba(217,119,6,.12);"
    "padding:.4rem .75rem;border-radius:4px}"
    ".attn-sentence.is-stale .stale{display:block}"
    "body.attn-stale-page .attn-translation .txt,body.attn-stale-page [data-testid=stPlotlyChart],"
    "body.attn-stale-page .atsx .inside{opacity:.35}"
    "</style>")
# Installed once per browser page; re-checks on every edit of the box and on every redraw.
SCRIPT = (
    "<script>(() => {"
    "if (window.attnStaleWatch) { window.attnStaleWatch(); return; }"
    "const norm = s => (s || '').trim().replace(/\\s+/g, ' ');"
    "const check = () => {"
    f"  const box = document.querySelector('{BOX}'); let any = false;"
    "  for (const note of document.querySelectorAll('.attn-sentence')) {"
    "    const stale = !!box && norm(box.value) !== norm(decodeURIComponent(note.dataset.source || ''));"
    "    note.classList.toggle('is-stale', stale); any = any || stale;"
    "  }"
    "  document.body.classList.toggle('attn-stale-page', any);"
    "};"
    "window.attnStaleWatch = check;"
    "document.addEventListener('input', check, true);"
    "let queued = false;"
    "new MutationObserver(() => { if (!queued) { queued = true;"
    "  requestAnimationFrame(() => { queued = false; check(); }); } })"
    ".observe(document.body, {childList: true, subtree: true});"
    "check();"
    "})();</script>")


def source_attribute(source: str) -> str:
    """`source` percent-encoded for a data-source attribute (SCRIPT decodes it): the page's HTML sanitiser
    drops an attribute whose value holds `-->`, `</title>`, `</script>` and the like, which would leave the
    note comparing the box with nothing, stale forever."""
    return quote(source, safe=" ")


def stale_note_html(source: str) -> str:
    """A note, hidden until SCRIPT finds the box holding other text than `source`, that names the sentence
    the results on the page belong to."""
    note = ("The sentence box has changed since the last translation. Press <b>Translate</b> (or Ctrl+Enter) to "
            f"translate it. Until then, everything below belongs to the previous sentence: “{esc(source)}”")
    return (f'<div class="attn-sentence" data-source="{source_attribute(source)}">{STYLE}'
            f'<div class="stale" role="status">{note}</div></div>')


def translation_html(source: str, translation: str, tgt_lang: str, label: str = "Translation") -> str:
    """The translation of `source`, large and in full contrast, under a small label (`label` (`tgt_lang`))."""
    return (f'<div class="attn-translation" data-source="{source_attribute(source)}">{STYLE}'
            f'<div class="lbl">{esc(label)} ({esc(tgt_lang)})</div>'
            f'<div class="txt" lang="{esc(tgt_lang)}">{esc(translation) or "(empty)"}</div></div>')


def show_stale_note(source: str) -> None:
    """The note of stale_note_html, with the script that shows it while the box differs from `source`."""
    st.html(stale_note_html(source) + SCRIPT, unsafe_allow_javascript=True)


def show_translation(source: str, translation: str, tgt_lang: str, label: str = "Translation") -> None:
    """The translation of `source` as the page's most visible text (see translation_html)."""
    st.html(translation_html(source, translation, tgt_lang, label))
