"""A shared URL opens the same view in a fresh browser (issue 35 item 2): the beam, the length, the forced token
and the page's tab travel with it, not only the sentence and the step."""
from __future__ import annotations

import re
from typing import Callable
from urllib.parse import quote_plus

from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import enter, settled


def test_a_beam_view_shared_by_url_opens_with_its_beam_and_length(server: str, page: Page,
                                                                 new_context: Callable[[], BrowserContext]) -> None:
    page.goto(f"{server}/step?sentence={quote_plus('a b c d')}")
    enter(page.get_by_label("Beam size (1 = greedy, max 16)"), "3")
    enter(page.get_by_label("Maximum output tokens", exact=True), "9")
    expect(page.locator(".js-plotly-plot .gtitle", has_text="Beam search tree")).to_be_visible()
    settled(page)
    expect(page).to_have_url(re.compile(r"beam=3"))
    expect(page).to_have_url(re.compile(r"max_len=9"))
    fresh = new_context().new_page()  # another browser: nothing but the URL
    fresh.goto(page.url)
    expect(fresh.locator(".js-plotly-plot .gtitle", has_text="Beam search tree")).to_be_visible()
    expect(fresh.get_by_label("Beam size (1 = greedy, max 16)")).to_have_value("3")
    expect(fresh.get_by_label("Maximum output tokens", exact=True)).to_have_value("9")


def test_the_open_tab_and_the_forced_token_travel_in_the_url(server: str, page: Page,
                                                            new_context: Callable[[], BrowserContext]) -> None:
    page.goto(f"{server}/heads?sentence={quote_plus('a b c d')}")
    page.get_by_role("tab", name="Ablation").click()
    settled(page)  # the click's rerun has finished writing the URL: what is there now is what a user copies
    expect(page).to_have_url(re.compile(r"heads_tab=Ablation"))
    fresh = new_context().new_page()
    fresh.goto(page.url)
    expect(fresh.get_by_role("tab", name="Ablation")).to_have_attribute("aria-selected", "true")
    fresh.goto(f"{server}/step?sentence={quote_plus('a b c d')}&step=0&force=b")
    expect(fresh.get_by_text("Forcing the typed word “b”")).to_be_visible()
    expect(fresh.get_by_text(re.compile(r"^Forced branch: b"))).to_be_visible()
