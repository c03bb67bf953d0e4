"""Several browser sessions at once against one server: each sees exactly its own sentence."""
from __future__ import annotations

from typing import Callable
from urllib.parse import quote

from playwright.sync_api import BrowserContext, expect

from tests.e2e.conftest import explorer_map

SESSIONS = [("", "a b c d e"), ("step", "b c d"), ("", "e d c b a f"), ("step", "g h i"), ("", "c a b j")]


def test_five_sessions_translate_and_step_at_once(server: str, new_context: Callable[[], BrowserContext]) -> None:
    pages = [new_context().new_page() for _ in SESSIONS]
    for page, (path, sentence) in zip(pages, SESSIONS):  # all five runs start before any is checked
        page.goto(f"{server}/{path}?sentence={quote(sentence)}", wait_until="commit")
    for page, (path, sentence) in zip(pages, SESSIONS):
        reversed_ = " ".join(reversed(sentence.split()))
        expect(page.locator("textarea[aria-label=\"Sentence (en)\"]")).to_have_value(sentence)
        if path == "step":
            expect(page.get_by_text(f"Step 0: chose “{sentence.split()[-1]}”")).to_be_visible()
        else:
            expect(page.get_by_text(reversed_, exact=True)).to_be_visible()
            heatmap = explorer_map(page, "Cross-attention · layer")
            expect(heatmap).to_be_visible()
            label = heatmap.get_attribute("aria-label")
            assert all(f": {word}," in label for word in sentence.split()), (sentence, label)
