"""Browser journey on Heads & layers -> Compare, drawn and answered by the explorer: the sidebar's choice against
another head by default, B picked in the page, the difference as the record gives it, then two sentences whose tokens
differ, compared position by position. Waits for elements only."""
from __future__ import annotations

import re

import numpy as np
from playwright.sync_api import Page, expect

import attnscope
from tests.e2e.conftest import explorer_map, translate_on_page
from tests.support import TOY_CHECKPOINT


def test_compare_heads_then_two_sentences(server: str, page: Page) -> None:
    translate_on_page(page, server, "a b c d", "d c b a")
    page.get_by_role("link", name="Heads & layers").click()
    page.get_by_role("tab", name="Compare").click()
    # A is the sidebar's choice (cross, layer 0, mean of heads), B the first head of that layer
    expect(explorer_map(page, "A (this sentence): Cross-attention · layer 0 · mean of heads")).to_be_visible()
    expect(explorer_map(page, "B (this sentence): Cross-attention · layer 0 · head 0")).to_be_visible()
    compare = page.locator(".atsx", has=page.locator(".summary"))
    cross = attnscope.load(TOY_CHECKPOINT).translate("a b c d").attention.cross[0]
    shown = float(compare.locator(".summary").get_attribute("data-max-abs"))
    assert shown > 0 and abs(shown - np.abs(cross.mean(0) - cross[0]).max()) <= 1e-6  # not a head against itself
    compare.locator(".bar").nth(1).locator(".group", has_text="Head").locator('button[data-value="2"]').click()
    expect(explorer_map(page, "B (this sentence): Cross-attention · layer 0 · head 2")).to_be_visible()
    shown = float(compare.locator(".summary").get_attribute("data-max-abs"))
    assert abs(shown - np.abs(cross.mean(0) - cross[2]).max()) <= 1e-6
    expect(compare.get_by_text("Red: A puts more weight there; blue: B does")).to_be_visible()
    page.get_by_text("two sentences").click()
    second = page.get_by_label("Second sentence", exact=True)
    second.fill("a b e d")
    second.press("Enter")
    expect(page.get_by_text("position by position", exact=False)).to_be_visible()
    expect(explorer_map(page, "A − B")).to_have_attribute("aria-label", re.compile(r"2: c / e"))
