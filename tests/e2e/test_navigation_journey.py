"""The sidebar menu on a fresh server: sections and page titles from the very first frame, never the
raw file names of pages/ ("translate", "step", ...) that Streamlit's legacy folder mode would list."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator
from urllib.parse import quote_plus

import pytest
from playwright.sync_api import Page, expect

from attnscope.ui.navigation import sections, specs
from tests.e2e.conftest import settled, streamlit_server
from tests.support import ROOT, copy_toy_checkpoint

RAW_NAMES = {"app"} | {p.stem for p in (ROOT / "pages").glob("*.py")}
TITLES = [spec.title for spec in specs()]
# Runs before any of the app's scripts: records the label of every link that ever appears in the
# sidebar or in Streamlit's own page menu (icons left out: a material icon's text is its name).
WATCH_LINKS = """
window.navLabels = [];
const label = (a) => {
  const copy = a.cloneNode(true);
  copy.querySelectorAll('[data-testid^="stIcon"]').forEach((icon) => icon.remove());
  return copy.textContent.trim();
};
const look = () => {
  for (const a of document.querySelectorAll('[data-testid="stSidebar"] a, [data-testid="stSidebarNav"] a')) {
    const text = label(a);
    if (text && !window.navLabels.includes(text)) window.navLabels.push(text);
  }
};
new MutationObserver(look).observe(document, {childList: true, subtree: true, characterData: true});
"""


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[str]:
    """A server no browser has opened yet: its first session is the one that used to flash the raw list."""
    folder = copy_toy_checkpoint(tmp_path / "checkpoints").parent
    env = dict(os.environ, ATTNSCOPE_CHECKPOINTS=str(folder), ATTNSCOPE_USER_MODELS=str(tmp_path / "user-models"))
    with streamlit_server(env, tmp_path) as url:
        yield url


def menu_seen(page: Page) -> list[str]:
    """Every link label the sidebar has shown since the page started loading."""
    return page.evaluate("window.navLabels")


def expect_the_sections_menu(page: Page) -> None:
    sidebar = page.get_by_test_id("stSidebar")
    for title in TITLES:
        expect(sidebar.get_by_role("link", name=title, exact=True)).to_be_visible()
    for section in sections():
        expect(sidebar.get_by_text(section, exact=True)).to_be_visible()
    settled(page)
    seen = menu_seen(page)
    assert set(TITLES) <= set(seen), seen  # the watcher saw the menu, so it would have seen a raw one
    assert not RAW_NAMES & set(seen), f"the sidebar showed raw page file names: {sorted(RAW_NAMES & set(seen))}"


def test_first_load_shows_only_the_sections_menu(fresh_server: str, page: Page) -> None:
    page.add_init_script(WATCH_LINKS)
    page.goto(fresh_server)
    expect(page.get_by_role("heading", name="Translate")).to_be_visible()
    expect_the_sections_menu(page)


def test_a_deep_link_on_a_fresh_server_opens_its_page_through_the_router(fresh_server: str, page: Page) -> None:
    page.add_init_script(WATCH_LINKS)
    page.goto(f"{fresh_server}/step?sentence={quote_plus('a b c d')}")
    expect(page.get_by_role("heading", name="Step through decoding")).to_be_visible()
    expect(page.get_by_text("Step 0: chose “d”")).to_be_visible()  # the URL's sentence "a b c d", reversed
    expect(page.get_by_test_id("stSidebar").get_by_text("Checkpoint", exact=True)).to_be_visible()
    expect_the_sections_menu(page)
    page.get_by_role("link", name="Model anatomy").click()
    expect(page.get_by_role("heading", name="Model anatomy")).to_be_visible()
    assert "/anatomy" in page.url


def test_the_translate_page_opens_at_its_own_name_too(fresh_server: str, page: Page) -> None:
    """/ is the Translate page; /translate showed "Page not found"."""
    page.add_init_script(WATCH_LINKS)
    page.goto(f"{fresh_server}/translate?sentence={quote_plus('a b c d')}")
    expect(page.get_by_role("heading", name="Translate")).to_be_visible()
    expect(page.get_by_text("d c b a").first).to_be_visible()
    expect(page.get_by_text("Page not found")).to_have_count(0)
    expect_the_sections_menu(page)
