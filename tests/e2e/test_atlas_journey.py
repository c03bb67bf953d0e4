"""Issue 46: the head atlas is answered in the browser. With the server process stopped (SIGSTOP), picking a kind
and a head, zooming, panning and hovering still work, and hover names the token the atlas mapped; then a click on a
point opens its sentence on the Heads page with that head selected."""
from __future__ import annotations

import os
import re
import signal
from urllib.parse import quote_plus

from playwright.sync_api import Page, expect

import attnscope
from attnscope.engine.analysis.atlas import atlas, vectors_each
from tests.e2e.conftest import Served, explorer_map, settled, type_sentence
from tests.support import TOY_CHECKPOINT

SENTENCES = ["a b c d e", "f g h", "i j k l", "b c d"]


def test_the_atlas_answers_in_the_browser_and_a_click_opens_the_sentence(server: Served, page: Page) -> None:
    page.goto(f"{server}/atlas")
    box = page.locator('textarea[aria-label^="…or paste sentences"]')
    type_sentence(page, box, "\n".join(SENTENCES))
    page.get_by_role("button", name=re.compile("^Map every head")).click()
    root = page.locator('.atsx[data-mode="atlas"]')
    expect(root.locator("canvas.atlas-head")).to_be_visible()
    settled(page)
    mapped = atlas(sorted(vectors_each(attnscope.load(TOY_CHECKPOINT), SENTENCES)))
    os.kill(server.pid, signal.SIGSTOP)
    try:
        root.locator(".bar button", has_text="Decoder masked self-attention").click()
        expect(root).to_have_attribute("data-kind", "decoder")
        matrix = root.locator("canvas.atlas-matrix")
        d = {k: float(matrix.get_attribute(f"data-{k}")) for k in ("left", "top", "size", "gap")}
        step = d["size"] + d["gap"]
        matrix.click(position={"x": d["left"] + 2 * step + d["size"] / 2, "y": d["top"] + step + d["size"] / 2})
        expect(root).to_have_attribute("data-layer", "1")
        expect(root).to_have_attribute("data-head", "2")
        head = root.locator("canvas.atlas-head")
        scale = float(head.get_attribute("data-scale"))
        over = root.locator("canvas.atlas-over")  # above the points, it takes the pointer
        over.hover()
        page.mouse.wheel(0, -200)  # zoom in around the pointer
        expect(head).not_to_have_attribute("data-scale", str(scale))
        cx = head.get_attribute("data-cx")
        box_ = over.bounding_box()
        page.mouse.move(box_["x"] + 100, box_["y"] + 100)
        page.mouse.down()
        page.mouse.move(box_["x"] + 160, box_["y"] + 130, steps=4)
        page.mouse.up()
        expect(head).not_to_have_attribute("data-cx", cx)  # panned
        root.locator(".bar button", has_text="fit").click()
        for i in (0, 5, len(mapped.tokens["target"]) + 2):  # queries (target tokens) first, then keys
            at = root.evaluate(f"r => r.explorer.pointAt({i})")
            page.mouse.move(at["x"], at["y"])
            tip = root.locator(".tip")
            expect(tip).to_be_visible()
            point = int(tip.get_attribute("data-point"))
            query = point < len(mapped.tokens["target"])
            n_queries = len(mapped.tokens["target"])
            sentence, position, token = mapped.tokens["target"][point if query else point - n_queries]
            assert tip.get_attribute("data-token") == token and int(tip.get_attribute("data-sentence")) == sentence
            assert tip.get_attribute("data-query") == str(query).lower()
            if point == i:  # the point itself (not one drawn over it)
                assert int(tip.get_attribute("data-position")) == position
    finally:
        os.kill(server.pid, signal.SIGCONT)
    at = root.evaluate("r => r.explorer.pointAt(1)")
    page.mouse.move(at["x"], at["y"])
    opened = SENTENCES[int(root.locator(".tip").get_attribute("data-sentence"))]  # the point under the pointer
    page.mouse.click(at["x"], at["y"])  # open its sentence on the Heads page
    expect(explorer_map(page, "Decoder masked self-attention · layer 1 · head 2")).to_be_visible()
    expect(page).to_have_url(re.compile(rf"/heads\?.*sentence={re.escape(quote_plus(opened))}"))
