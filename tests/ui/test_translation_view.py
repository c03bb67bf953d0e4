"""The translation headline and the stale note keep the sentence they belong to through the page's sanitiser."""
from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import unquote

import pytest

from attnscope.ui.translation_view import stale_note_html, translation_html

# What DOMPurify (st.html's sanitiser) treats as markup inside an attribute value, and drops the attribute for.
UNSAFE = re.compile(r"((--!?|])>)|</(style|title|script|textarea)|[<>]", re.IGNORECASE)


def data_sources(markup: str) -> list[str]:
    """Every data-source attribute of `markup`, as the browser's parser reads it."""
    found: list[str] = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.extend(value or "" for name, value in attrs if name == "data-source")

    Parser().feed(markup)
    return found


@pytest.mark.parametrize("source", ["a --> b", "see </title> here", "x </script> y", "a ]> b <b>bold</b> & ü"])
def test_the_sentence_survives_the_sanitiser_and_decodes_back(source: str) -> None:
    for markup in (stale_note_html(source), translation_html(source, "t", "de")):
        (value,) = data_sources(markup)
        assert not UNSAFE.search(value)
        assert unquote(value) == source  # what the script's decodeURIComponent gives back
