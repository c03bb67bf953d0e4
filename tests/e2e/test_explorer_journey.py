"""Issue 42: every look is answered in the browser. With the server process stopped (SIGSTOP), clicks, keys and
hover still change the view, and the values the explorer shows on hover are the ones the model recorded."""
from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Iterator
from urllib.parse import quote_plus

import numpy as np
import pytest
from playwright.sync_api import Page, expect

import attnscope
from tests.e2e.conftest import Served, explorer_map, settled, streamlit_server
from tests.support import CEILING, TOY_CHECKPOINT

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


@pytest.fixture(scope="module")
def long_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A server on a tiny random model whose outputs never end (<eos> made unlikely): a 400-token output's attention
    passes what one payload carries, so the browser holds one layer and asks for the others."""
    from attnscope.checkpoints.checkpoint import save
    from tests.engine_fixtures import tiny_translator

    tr = tiny_translator(0, eos_bias=-20.0, max_len=512)
    folder = tmp_path_factory.mktemp("long-checkpoints")
    path = save(tr.model, tr.bundle, folder / "tiny-long.safetensors")
    env = dict(os.environ, ATTNSCOPE_CHECKPOINTS=str(folder),
               ATTNSCOPE_USER_MODELS=str(tmp_path_factory.mktemp("long-user-models")))
    with streamlit_server(env, tmp_path_factory.mktemp("long-log")) as url:
        yield url, path


def test_a_long_outputs_missing_layer_is_fetched_and_shows_the_recorded_values(long_server, page: Page) -> None:
    """Issue 42 item 4: the payload holds the open layer; another layer is asked for at once, drawn when it comes
    (the explorer reruns alone), with the values recorded; Inside one head fetches its layers the same way."""
    url, path = long_server
    sentence = " ".join("abcdefghijkl"[i % 12] for i in range(150))
    page.goto(f"{url}/step?sentence={quote_plus(sentence)}&max_len=400")
    explorer = page.locator(".atsx")
    expect(page.locator('.atsx .cells-wrap[data-name="self-rows"]')).to_be_visible(timeout=CEILING * 1e3)
    settled(page)
    assert not explorer.evaluate("root => root.explorer.w.h.complete")  # one layer: the others are asked for
    explorer.focus()
    page.keyboard.press("PageDown")
    page.keyboard.press("PageDown")  # layer 2
    expect(explorer).to_have_attribute("data-layer", "2")
    expect(explorer.locator(".missing")).to_have_text("")
    assert explorer.evaluate("root => root.explorer.w.has('cross', 2) && !root.explorer.w.has('cross', 0)")
    record = attnscope.load(path).translate(sentence, max_len=400).attention
    step = int(explorer.get_attribute("data-step"))
    value = explorer.evaluate(f"root => root.explorer.w.value('cross', 2, 1, {step}, 7)")
    assert abs(value - float(record.array("cross")[2, 1, step, 7])) <= 1e-6
    page.goto(f"{url}/inside?sentence={quote_plus(sentence)}&max_len=400")
    expect(page.locator(".atsx .inside .headline")).to_be_visible(timeout=CEILING * 1e3)
    assert not explorer.evaluate("root => root.explorer.w.h.complete")
    page.locator(".atsx .bar .group", has_text="Layer").locator('button[data-value="2"]').click()
    expect(page.locator(".atsx .inside .headline")).to_contain_text("layer 2")
    expect(page.locator('.atsx .inside .view[data-title^="Eq. 1"]')).to_be_visible()
    weights = explorer.evaluate("root => Array.from(root.explorer.w.at('cross.2.weights', 0, 3).subarray(0, 5))")
    assert np.abs(np.array(weights) - record.array("cross")[2, 0, 3, :5]).max() <= 1e-6
