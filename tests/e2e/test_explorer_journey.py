"""Issue 42: every look is answered in the browser. With the server process stopped (SIGSTOP), clicks, keys and
hover still change the view, and the values the explorer shows on hover are the ones the model recorded."""
from __future__ import annotations

import os
import re
import signal
from urllib.parse import quote_plus

from playwright.sync_api import Page, expect

import attnscope
from tests.e2e.conftest import Served, explorer_map, settled
from tests.support import TOY_CHECKPOINT

SENTENCE = "a b c d e"


def hover_value(page: Page, name: str, row: int, col: int) -> float:
    """Point at one cell of an explorer map and read the value its tooltip reports."""
    wrap = page.locator(f'.atsx .cells-wrap[data-name="{name}"]')
    d = {k: float(wrap.locator("canvas.cells").get_attribute(f"data-{k}")) for k in ("left", "top", "cell-w", "cell-h")}
    wrap.locator("canvas.cells-over").hover(position={"x": d["left"] + (col + 0.5) * d["cell-w"],
                                                      "y": d["top"] + (row + 0.5) * d["cell-h"]})  # scrolled into view
    tip = page.locator(".atsx .tip")
    expect(tip).to_have_attribute("data-row", str(row))
    expect(tip).to_have_attribute("data-col", str(col))
    return float(tip.get_attribute("data-value"))


def test_looks_are_answered_with_the_server_stopped_and_show_the_recorded_values(server: Served, page: Page) -> None:
    page.goto(f"{server}/?sentence={quote_plus(SENTENCE)}")
    expect(explorer_map(page, "Cross-attention · layer 0 · mean of heads")).to_be_visible()
    settled(page)
    record = attnscope.load(TOY_CHECKPOINT).translate(SENTENCE).attention
    seen = []
    os.kill(server.pid, signal.SIGSTOP)
    try:
        page.locator(".atsx .bar button", has_text="Encoder self-attention").click()
        page.locator(".atsx .bar .group", has_text="Head").locator('button[data-value="1"]').click()
        expect(explorer_map(page, "Encoder self-attention · layer 0 · head 1")).to_be_visible()
        seen += [("encoder", 0, 1, r, c, hover_value(page, "main", r, c)) for r, c in ((0, 0), (2, 4), (5, 1))]
        page.locator(".atsx").focus()
        page.keyboard.press("PageDown")  # the next layer
        page.keyboard.press("c")  # cross-attention
        page.keyboard.press("ArrowDown")  # the next head
        expect(explorer_map(page, f"Cross-attention · layer 1 · head {2 % record.n_heads}")).to_be_visible()
        seen += [("cross", 1, 2 % record.n_heads, r, c, hover_value(page, "main", r, c)) for r, c in ((0, 0), (3, 5))]
        page.keyboard.press("d")
        expect(explorer_map(page, "Decoder masked self-attention · layer 1")).to_be_visible()
        seen.append(("decoder", 1, 2 % record.n_heads, 3, 2, hover_value(page, "main", 3, 2)))
        grid = page.locator(".atsx canvas.grid")  # a click on the grid opens that head
        d = {k: float(grid.get_attribute(f"data-{k}")) for k in ("left", "top", "map-w", "map-h", "gap")}
        grid.click(position={"x": d["left"] + d["map-w"] / 2, "y": d["top"] + d["map-h"] + d["gap"] + d["map-h"] / 2})
        expect(explorer_map(page, "Decoder masked self-attention · layer 1 · head 0")).to_be_visible()
    finally:
        os.kill(server.pid, signal.SIGCONT)
    for kind, layer, head, row, col, value in seen:
        assert abs(value - float(record.array(kind)[layer, head, row, col])) <= 1e-6, (kind, layer, head, row, col)
    expect(page).to_have_url(re.compile(r"kind=decoder&layer=1&head=0|kind=decoder.*layer=1.*head=0"))  # then it follows
    expect(page.get_by_test_id("stSidebar").get_by_role("radio", name="Decoder masked self-attention")).to_be_checked()


def test_steps_play_and_move_in_the_browser_with_the_server_stopped(server: Served, page: Page) -> None:
    page.goto(f"{server}/step?sentence={quote_plus('a b c d')}")
    expect(page.get_by_text("Step 0: chose “d”")).to_be_visible()
    settled(page)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        page.get_by_role("button", name="Next ▶").click()
        expect(page.get_by_text("Step 1: chose “c”")).to_be_visible()
        page.locator(".atsx").focus()
        page.keyboard.press("ArrowRight")
        expect(page.get_by_text("Step 2: chose “b”")).to_be_visible()
        page.get_by_role("button", name="Play").click()
        expect(page.get_by_text("Step 4: chose “<eos>”")).to_be_visible()
        expect(page.get_by_role("button", name="Play")).to_be_visible()  # stopped by itself at the end
        masked = page.locator('.atsx .cells-wrap[data-name="self-rows"] canvas.cells')
        expect(masked).to_have_attribute("aria-label", re.compile(r"Columns \(prefix\): 0: <bos>, 1: d, 2: c, 3: b, 4: a"))
    finally:
        os.kill(server.pid, signal.SIGCONT)
    expect(page).to_have_url(re.compile(r"step=4"))
    expect(page.get_by_text("What if step 4 chose something else?")).to_be_visible()  # the server caught up
