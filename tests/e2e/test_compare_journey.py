"""Browser journey on Heads & layers -> Compare: the sidebar's choice against another head by default, then two sentences
whose tokens differ, compared position by position. Waits for elements only."""
from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import translate_on_page


def test_compare_heads_then_two_sentences(server: str, page: Page) -> None:
    translate_on_page(page, server, "a b c d", "d c b a")
    page.get_by_role("link", name="Heads & layers").click()
    page.get_by_role("tab", name="Compare").click()
    difference = page.get_by_text(re.compile(r"max \|A − B\| = \d\.\d{3}"))
    expect(difference).to_be_visible()
    assert difference.inner_text().strip() != "max |A − B| = 0.000"  # not a head against itself
    # A is the sidebar's choice (cross, layer 0, mean of heads), B the first head of that layer
    expect(page.locator(".js-plotly-plot .gtitle", has_text="A: cross · layer 0 · mean of heads")).to_be_visible()
    expect(page.locator(".js-plotly-plot .gtitle", has_text="B: cross · layer 0 · head 0")).to_be_visible()
    page.get_by_text("two sentences").click()
    second = page.get_by_label("Second sentence")
    second.fill("a b e d")
    second.press("Enter")
    expect(page.get_by_text("position by position", exact=False)).to_be_visible()
    expect(page.locator(".js-plotly-plot .xtick", has_text="c / e").first).to_be_attached()
