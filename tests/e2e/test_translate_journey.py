"""Key journey in a real browser: type a sentence, see the translation and the heatmaps."""
from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import translate_on_page


def test_type_a_sentence_and_see_translation_and_heatmaps(server: str, page: Page) -> None:
    translate_on_page(page, server, "a b c d e", "e d c b a")
    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    expect(page).to_have_url(re.compile(r"sentence=a(\+|%20)b(\+|%20)c(\+|%20)d(\+|%20)e"))  # waits for the URL update


def test_step_forward_twice_switch_page_and_come_back(server: str, page: Page) -> None:
    translate_on_page(page, server, "a b c d", "d c b a")
    page.get_by_role("link", name="Step through decoding").click()
    expect(page.get_by_text("Step 0: chose “d”")).to_be_visible()
    page.get_by_role("button", name="Next ▶").click()
    expect(page.get_by_text("Step 1: chose “c”")).to_be_visible()
    page.get_by_role("button", name="Next ▶").click()
    expect(page.get_by_text("Step 2: chose “b”")).to_be_visible()
    page.get_by_role("link", name="Positional encoding").click()
    expect(page.get_by_text("Sinusoidal encoding", exact=False).first).to_be_visible()
    page.get_by_role("link", name="Step through decoding").click()
    expect(page.get_by_text("Step 2: chose “b”")).to_be_visible()
    expect(page.locator("textarea[aria-label=\"Sentence (en)\"]")).to_have_value("a b c d")
