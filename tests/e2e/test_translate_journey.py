"""Key journey in a real browser: type a sentence, see the translation and the heatmaps."""
from __future__ import annotations

import re

from playwright.sync_api import Locator, Page, expect

from tests.e2e.conftest import explorer_map, settled, translate_on_page


def test_type_a_sentence_and_see_translation_and_heatmaps(server: str, page: Page) -> None:
    translate_on_page(page, server, "a b c d e", "e d c b a")
    expect(explorer_map(page, "Cross-attention · layer")).to_be_visible()
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


def font_px(locator: Locator) -> float:
    return float(locator.evaluate("e => parseFloat(getComputedStyle(e).fontSize)"))


def colour(locator: Locator) -> str:
    return locator.evaluate("e => getComputedStyle(e).color")


def test_the_translation_never_silently_disagrees_with_the_box(server: str, page: Page, tmp_path) -> None:
    """Issue 23: while the box holds a sentence not yet translated, the results say whose they are; the
    Translate button (or Ctrl+Enter) translates it; the translation is the page's headline."""
    translate_on_page(page, server, "a b c d", "d c b a")
    settled(page)
    headline, note = page.locator(".attn-translation .txt"), page.locator(".attn-sentence .stale")
    expect(headline).to_have_text("d c b a")
    expect(note).to_be_hidden()
    assert font_px(headline) >= font_px(page.locator("h1").first)  # as large as the page title, larger than the rest
    assert font_px(headline) > 2 * font_px(page.get_by_text("Every look is answered in your browser").first)
    assert colour(headline) == colour(page.locator("h1").first)  # full contrast, not a pale caption
    box = page.locator("textarea[aria-label=\"Sentence (en)\"]")
    box.fill("a b e")  # typed, not yet translated
    expect(note).to_be_visible()
    expect(note).to_contain_text("belongs to the previous sentence: “a b c d”")
    page.screenshot(path=str(tmp_path / "stale.png"))
    page.get_by_role("button", name="Translate").click()
    expect(headline).to_have_text("e b a")
    expect(note).to_be_hidden()
    box.fill("c b a")
    expect(note).to_be_visible()
    box.press("Control+Enter")  # the keyboard way still works
    expect(headline).to_have_text("a b c")
    expect(note).to_be_hidden()
