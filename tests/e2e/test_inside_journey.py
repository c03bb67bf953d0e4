"""The issue's journey in a real browser on the shipped en-de model: "Mädchen" at step 2, inside a head."""
from __future__ import annotations

import os
from typing import Iterator

import pytest
from playwright.sync_api import Page, expect

from attnscope.checkpoints.registry import CHECKPOINTS_ENV
from tests.e2e.conftest import open_menu, settled, streamlit_server
from tests.support import shown_deltas

SENTENCE = "A girl is playing in the park."  # the shipped model writes "Ein Mädchen spielt im Park."


@pytest.fixture(scope="module")
def shipped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A streamlit server on the repository's shipped checkpoints."""
    env = {k: v for k, v in os.environ.items() if k != CHECKPOINTS_ENV}
    env["ATTNSCOPE_USER_MODELS"] = str(tmp_path_factory.mktemp("inside-user-models"))
    with streamlit_server(env, tmp_path_factory.mktemp("inside-log")) as url:
        yield url


def pick(page: Page, label: str, option: str, shows: str) -> None:
    """Pick `option` in the page's `label` menu and wait for the text `shows`, which the run it starts draws
    (the page's kind, layer and head rerun the whole app, sidebar included)."""
    choice = page.get_by_role("option", name=option, exact=True)
    open_menu(page.get_by_test_id("stMain").get_by_role("combobox", name=label), choice)
    choice.click()
    expect(page.get_by_text(shows, exact=False).first).to_be_visible()
    settled(page)


def test_maedchen_at_step_2_inside_a_decoder_self_head(shipped_server: str, page: Page) -> None:
    page.goto(f"{shipped_server}/inside?sentence={SENTENCE.replace(' ', '+')}")
    first_load = 180_000  # the first visit loads the en-de model and traces it on a busy 2-core machine
    expect(page.get_by_role("heading", name="Inside one head")).to_be_visible(timeout=first_load)
    expect(page.locator(".attn-view").first).to_be_visible(timeout=first_load)
    settled(page)
    pick(page, "Attention", "Decoder masked self-attention", "Decoder masked self-attention · layer 0 · head")
    step = page.get_by_role("slider", name="Decoding step")
    for expected in ("Step 1:", "Step 2:"):
        step.focus()
        step.press("ArrowRight")
        expect(page.get_by_text(expected, exact=True)).to_be_visible()
        settled(page)
    pick(page, "Head", "head 3", "Query and keys of head 3")
    pick(page, "Query token", "2: Mädchen", "Query: “Mädchen” (position 2)")
    expect(page.get_by_text("the decoder has read <bos> Ein Mädchen and chose “spielt”")).to_be_visible()
    expect(page.get_by_text("Query: “Mädchen” (position 2)")).to_be_visible()
    for title in ("Query and keys of head 3", "q∘k: the dot product", "Eq. 1: Attention(Q, K, V)", "Mask M added",
                  "Values, weighted values", "MultiHead = Concat", "Pre-LN residual block", "Logit lens at step 2"):
        expect(page.locator(".attn-view").filter(has_text=title).first).to_be_visible()
    caption = page.get_by_text("recomputed here, equals the weights the model computed", exact=False)
    expect(caption).to_be_visible()
    deltas = shown_deltas(caption.inner_text())  # float32 rounding: 0.0e+00 on one CPU, 3.3e-09 on another
    assert len(deltas) == 2 and max(deltas) <= 1e-6, deltas
    settled(page)
    first_query = page.locator(".attn-view").filter(has_text="Mask M").locator("tbody tr").first
    expect(first_query.locator("td").last).to_have_text("−∞")  # <bos> may not look at "Mädchen"
    page.get_by_role("tab", name="6 · Positional encodings (section 3.5)").click()
    expect(page.locator(".js-plotly-plot").first).to_be_visible()  # the positional panels stay charts


def test_cross_and_encoder_attention_open_in_the_browser(shipped_server: str, page: Page) -> None:
    """The same page for the two other kinds: cross-attention reads the encoder's output; the encoder has no mask."""
    page.goto(f"{shipped_server}/inside?sentence={SENTENCE.replace(' ', '+')}")
    expect(page.locator(".attn-view").first).to_be_visible()
    settled(page)
    pick(page, "Attention", "Cross-attention (decoder → source)", "Cross-attention (decoder → source) · layer 0")
    pick(page, "Query token", "0: <bos>", "Query: “<bos>” (position 0)")
    expect(page.locator(".attn-view").filter(has_text="Keys and values are projected from the encoder's output")).to_be_visible()
    expect(page.locator(".attn-view").filter(has_text="no mask: every key is visible")).to_be_visible()
    pick(page, "Attention", "Encoder self-attention", "Encoder self-attention · layer 0")
    pick(page, "Query token", "1: girl", "Query: “girl” (position 1)")
    expect(page.get_by_text("Query: “girl” (position 1)", exact=False)).to_be_visible()
    expect(page.locator(".attn-view").filter(has_text="Keys and values are projected from layer 0's input")).to_be_visible()
    expect(page.locator(".attn-view").filter(has_text="softmax row of “girl”")).to_be_visible()


def test_the_page_and_the_sidebar_show_one_head(shipped_server: str, page: Page, tmp_path) -> None:
    """Issue 23: one kind, layer and head for the sidebar and the page, whichever the user changes; every
    d_model band on its own colour scale, its range written beside it."""
    page.goto(f"{shipped_server}/inside?sentence={SENTENCE.replace(' ', '+')}")
    expect(page.locator(".attn-view").first).to_be_visible()
    settled(page)
    sidebar, main = page.get_by_test_id("stSidebar"), page.get_by_test_id("stMain")
    pick(page, "Head", "head 2", "Query and keys of head 2")  # the page leads
    expect(sidebar.get_by_role("combobox", name="Head")).to_have_value("head 2")
    sidebar.get_by_text("Encoder self-attention").click()  # the sidebar leads
    expect(page.get_by_text("Encoder self-attention · layer 0 · head 2")).to_be_visible()
    settled(page)
    expect(main.get_by_role("combobox", name="Attention")).to_have_value("Encoder self-attention")
    expect(page.locator(".attn-view").filter(has_text="Query and keys of head 2")).to_be_visible()
    inputs = page.locator(".attn-view").filter(has_text="Inputs of “")
    ranges = inputs.locator("th.x").all_inner_texts()
    assert len(ranges) == 5 and all(r.startswith("±") for r in ranges), ranges
    assert len(set(ranges)) > 1  # each band its own range
    inputs.screenshot(path=str(tmp_path / "inside-bands.png"))
