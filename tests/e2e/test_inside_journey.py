"""The issue's journey in a real browser on the shipped en-de model: "Mädchen" at step 2, inside a head; and every
pick on the page answered in the browser, with the values the model computed (issue 42)."""
from __future__ import annotations

import os
import re
import signal
from typing import Iterator

import numpy as np
import pytest
from playwright.sync_api import Page, expect

import attnscope
from attnscope.checkpoints.registry import CHECKPOINTS_ENV
from attnscope.engine.inside.head_view import head_view
from attnscope.engine.inside.traced import sentence_trace
from attnscope.engine.recording.trace import decoder_inputs
from tests.e2e.conftest import Served, settled, streamlit_server
from tests.support import CEILING, TOY_CHECKPOINT, shown_deltas

SENTENCE = "A girl is playing in the park."  # the shipped model writes "Ein Mädchen spielt im Park."


@pytest.fixture(scope="module")
def shipped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A streamlit server on the repository's shipped checkpoints."""
    env = {k: v for k, v in os.environ.items() if k != CHECKPOINTS_ENV}
    env["ATTNSCOPE_USER_MODELS"] = str(tmp_path_factory.mktemp("inside-user-models"))
    with streamlit_server(env, tmp_path_factory.mktemp("inside-log")) as url:
        yield url


def view(page: Page, title_start: str):
    """One of the head's views, found by the start of its title."""
    return page.locator(f'.atsx .inside .view[data-title^="{title_start}"]')


def headline(page: Page):
    return page.locator(".atsx .inside .headline")


def pick(page: Page, group: str, value: str) -> None:
    """Click a button of the explorer's toolbar: a kind (`group` "") or a layer or head."""
    page.locator(".atsx .bar .group", has_text=group).locator(f'button[data-value="{value}"]').click()


def hover_value(page: Page, name: str, row: int, col: int) -> str:
    """Point at one cell of a view drawn on canvas and read the value its tooltip reports."""
    wrap = page.locator(f'.atsx .cells-wrap[data-name="{name}"]')
    d = {k: float(wrap.locator("canvas.cells").get_attribute(f"data-{k}")) for k in ("left", "top", "cell-w", "cell-h")}
    wrap.locator("canvas.cells-over").hover(position={"x": d["left"] + (col + 0.5) * d["cell-w"],
                                                      "y": d["top"] + (row + 0.5) * d["cell-h"]})
    tip = page.locator(".atsx .tip")
    expect(tip).to_have_attribute("data-cells", name)
    expect(tip).to_have_attribute("data-row", str(row))
    expect(tip).to_have_attribute("data-col", str(col))
    return tip.get_attribute("data-value")


def test_maedchen_at_step_2_inside_a_decoder_self_head(shipped_server: str, page: Page) -> None:
    page.goto(f"{shipped_server}/inside?sentence={SENTENCE.replace(' ', '+')}")
    # the first visit loads the en-de model and traces it: only a hang takes the suite's CEILING
    expect(page.get_by_role("heading", name="Inside one head")).to_be_visible(timeout=CEILING * 1e3)
    expect(headline(page)).to_be_visible(timeout=CEILING * 1e3)
    settled(page)
    pick(page, "", "decoder")
    expect(headline(page)).to_contain_text("Decoder masked self-attention · layer 0 · head")
    page.locator(".atsx").focus()
    for expected in ("Step 1:", "Step 2:"):
        page.keyboard.press("ArrowRight")
        expect(headline(page)).to_contain_text(expected)
    pick(page, "Head", "3")
    expect(view(page, "Query and keys of head 3")).to_be_visible()
    page.get_by_label("Query token").select_option("2")
    expect(headline(page)).to_contain_text("the decoder has read <bos> Ein Mädchen and chose “spielt”")
    expect(headline(page)).to_contain_text("Query: “Mädchen” (position 2)")
    for title in ("Query and keys of head 3", "q∘k: the dot product", "Eq. 1: Attention(Q, K, V)", "Mask M added",
                  "Values, weighted values", "MultiHead = Concat", "Pre-LN residual block", "Logit lens at step 2"):
        expect(view(page, title)).to_be_visible()
    caption = page.locator(".atsx .inside .caption", has_text="recomputed here, equals the weights the model computed")
    deltas = shown_deltas(caption.inner_text())  # float32 rounding: 0.0e+0 on one CPU, 3.3e-9 on another
    assert len(deltas) == 2 and max(deltas) <= 1e-6, deltas
    assert hover_value(page, "mask", 0, 2) == "-Infinity"  # <bos> may not look at "Mädchen"
    page.get_by_role("tab", name="6 · Positional encodings (section 3.5)").click()
    expect(page.locator(".js-plotly-plot").first).to_be_visible()  # the positional panels stay charts


def test_cross_and_encoder_attention_open_in_the_browser(shipped_server: str, page: Page) -> None:
    """The same page for the two other kinds: cross-attention reads the encoder's output; the encoder has no mask."""
    page.goto(f"{shipped_server}/inside?sentence={SENTENCE.replace(' ', '+')}")
    expect(headline(page)).to_be_visible()
    pick(page, "", "cross")
    page.get_by_label("Query token").select_option("0")
    expect(headline(page)).to_contain_text("Query: “<bos>” (position 0)")
    expect(view(page, "Keys and values are projected from the encoder's output")).to_be_visible()
    expect(view(page, "Mask M added before the softmax — no mask: every key is visible")).to_be_visible()
    pick(page, "", "encoder")
    page.get_by_label("Query token").select_option("1")
    expect(headline(page)).to_contain_text("Encoder self-attention · layer 0")
    expect(headline(page)).to_contain_text("Query: “girl” (position 1)")
    expect(view(page, "Keys and values are projected from layer 0's input")).to_be_visible()
    expect(view(page, "softmax row of “girl”")).to_be_visible()


def test_the_page_and_the_sidebar_show_one_head(shipped_server: str, page: Page) -> None:
    """Issue 23: one kind, layer and head for the sidebar and the page, whichever the user changes; every
    d_model band on its own colour scale, its range written beside it."""
    page.goto(f"{shipped_server}/inside?sentence={SENTENCE.replace(' ', '+')}")
    expect(headline(page)).to_be_visible()
    settled(page)
    sidebar = page.get_by_test_id("stSidebar")
    pick(page, "Head", "2")  # the page leads; the sidebar hears of it once the user pauses
    expect(view(page, "Query and keys of head 2")).to_be_visible()
    expect(sidebar.get_by_role("combobox", name="Head")).to_have_value("head 2")
    settled(page)
    sidebar.get_by_text("Encoder self-attention").click()  # the sidebar leads
    expect(headline(page)).to_contain_text("Encoder self-attention · layer 0 · head 2")
    tails = page.locator('.atsx .cells-wrap[data-name="inputs"]').get_attribute("data-tails").split("|")
    assert len(tails) == 5 and all(t.startswith("±") for t in tails), tails
    assert len(set(tails)) > 1  # each band its own range


def test_picks_are_answered_with_the_server_stopped_and_show_the_traced_values(server: Served, page: Page) -> None:
    """Kind, head, step and query change with the server paused; the numbers read back are the trace's."""
    sentence = "a b c d"
    page.goto(f"{server}/inside?sentence={sentence.replace(' ', '+')}")
    expect(headline(page)).to_be_visible()
    settled(page)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        pick(page, "", "decoder")
        pick(page, "Head", "2")
        page.locator(".atsx").focus()
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")  # step 2: the query is the token the decoder reads there
        expect(headline(page)).to_contain_text("Decoder masked self-attention · layer 0 · head 2")
        expect(headline(page)).to_contain_text("Query: “c” (position 2)")
        q = [float(hover_value(page, "qk", 0, d)) for d in (0, 5, 11)]
        k1 = float(hover_value(page, "qk", 2, 3))  # the key of position 1
        weights = [float(hover_value(page, "scores", 3, j)) for j in range(3)]  # the softmax row
        products = float(hover_value(page, "products", 1, 7))
        pick(page, "Layer", "1")
        page.get_by_label("Query token").select_option("1")
        expect(headline(page)).to_contain_text("Query: “d” (position 1)")
        later = float(hover_value(page, "scores", 3, 0))
    finally:
        os.kill(server.pid, signal.SIGCONT)
    tr = attnscope.load(TOY_CHECKPOINT)
    result = tr.translate(sentence)
    with tr.inference():
        whole = sentence_trace(tr.model, result.source_ids, decoder_inputs(result.target_ids, tr.model.config.bos_id))
    v = head_view(whole.until(2), "decoder", 0, 2, 2, result.source_tokens, result.target_tokens[:3])
    assert np.abs(np.array(q) - v.q[[0, 5, 11]]).max() <= 1e-6 and abs(k1 - v.k[1, 3]) <= 1e-6
    assert np.abs(np.array(weights) - v.weights).max() <= 1e-6 and abs(products - v.products[1, 7]) <= 1e-6
    assert abs(later - head_view(whole.until(2), "decoder", 1, 2, 1, result.source_tokens,
                                 result.target_tokens[:3]).weights[0]) <= 1e-6
    expect(page).to_have_url(re.compile(r"kind=decoder.*layer=1.*head=2.*step=2|step=2.*kind=decoder"))  # then it follows
