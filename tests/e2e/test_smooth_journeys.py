"""Browser journeys of issue 17: stepping (timed, not asserted), beam 16, sidebar kind <-> tab, long input.

Timings are recorded with `record_property` (see the JUnit XML or `-rA`) and never asserted:
speed is measured by `python -m attnscope.bench` (section app), not by tests on a shared machine.
"""
from __future__ import annotations

import re
import time
from typing import Callable
from urllib.parse import quote_plus

from playwright.sync_api import Page, expect

from tests.e2e.conftest import explorer_map, open_menu, settled


def chart_title(page: Page, prefix: str):
    """The title of a plotly chart (the beam tree)."""
    return page.locator(".js-plotly-plot .gtitle", has_text=prefix)


def view_title(page: Page, prefix: str):
    """A title in the attention explorer (the step's views are drawn in the browser)."""
    return page.locator(".atsx .title", has_text=prefix)


def test_step_through_and_play(server: str, page: Page, record_property: Callable[[str, object], None]) -> None:
    page.goto(f"{server}/step?sentence={quote_plus('a b c d')}")
    expect(page.get_by_text("Step 0: chose “d”")).to_be_visible()
    settled(page)
    clicks = []
    for t, token in enumerate(["c", "b", "a"], start=1):
        start = time.perf_counter()
        page.get_by_role("button", name="Next ▶").click()
        expect(page.get_by_text(f"Step {t}: chose “{token}”")).to_be_visible()
        expect(view_title(page, f"Source as seen at step {t}")).to_be_visible()
        expect(explorer_map(page, f"Cross-attention of step {t},")).to_be_visible()
        clicks.append(round(time.perf_counter() - start, 3))
    record_property("next_click_seconds", clicks)
    rows = explorer_map(page, "Cross-attention of step 3,")  # every layer's heads and mean, every source token
    named = re.compile(r"Rows \(head\): L0 H0, L0 H1, .*L0 mean.*Columns \(source\): 0: a, 1: b")
    expect(rows).to_have_attribute("aria-label", named)
    assert rows.bounding_box()["width"] >= 60
    expect(page).to_have_url(re.compile(r"step=3"))
    page.get_by_role("button", name="Previous").click()
    expect(page.get_by_text("Step 2: chose “b”")).to_be_visible()
    page.get_by_role("button", name="Play").click()
    expect(page.get_by_text("Step 4: chose “<eos>”")).to_be_visible()
    expect(page.get_by_role("button", name="Play")).to_be_visible()  # stopped by itself at the end


def hypothesis_options(page: Page) -> list[str]:
    """Open the Hypothesis menu and read its option labels."""
    options = page.get_by_role("option")
    open_menu(page.get_by_role("combobox", name="Hypothesis"), options.first)
    labels = options.all_inner_texts()
    page.keyboard.press("Escape")
    return labels


def test_beam_sixteen_lists_and_draws_the_new_hypotheses(server: str, page: Page) -> None:
    page.goto(f"{server}/step?sentence={quote_plus('a b c d')}")
    beam = page.get_by_label("Beam size (1 = greedy, max 16)")
    beam.fill("16")
    beam.press("Enter")
    expect(chart_title(page, "Beam search tree: paths of the 3 best of")).to_be_visible()
    expect(page.get_by_role("combobox", name="Hypothesis")).to_have_value(re.compile(r"^1\. d c b a"))
    settled(page)
    labels = hypothesis_options(page)
    assert len(labels) > 2 and all(re.match(r"\d+\. \S", label) for label in labels), labels  # none blank
    beam.fill("2")
    beam.press("Enter")
    expect(chart_title(page, "Beam search tree: paths of the 2 best of 2")).to_be_visible()
    settled(page)
    assert len(hypothesis_options(page)) == 2  # the old beam's labels are gone


def test_sidebar_kind_and_the_explorers_kind_are_one_choice(server: str, page: Page) -> None:
    page.goto(f"{server}/?sentence={quote_plus('a b c')}")
    expect(explorer_map(page, "Cross-attention · layer")).to_be_visible()
    page.get_by_test_id("stSidebar").get_by_text("Encoder self-attention").click()
    expect(explorer_map(page, "Encoder self-attention · layer")).to_be_visible()
    page.locator(".atsx .bar button", has_text="Decoder masked self-attention").click()
    expect(explorer_map(page, "Decoder masked self-attention · layer")).to_be_visible()
    expect(page.get_by_test_id("stSidebar").get_by_role("radio", name="Decoder masked self-attention")).to_be_checked()
    expect(page).to_have_url(re.compile(r"kind=decoder"))
    shared = page.url
    other = page.context.new_page()
    other.goto(shared)  # a shared link opens the same kind
    expect(explorer_map(other, "Decoder masked self-attention · layer")).to_be_visible()


def test_long_input_is_flagged_labelled_and_scaled(server: str, page: Page) -> None:
    sentence = " ".join("abcdefghij"[i % 10] for i in range(60))
    page.goto(f"{server}/?kind=encoder&sentence={quote_plus(sentence)}")
    expect(page.get_by_text("trained this model on inputs of at most about 10")).to_be_visible()
    expect(page.get_by_text("each map is scaled to its own maximum")).to_be_visible()
    heatmap = explorer_map(page, "Encoder self-attention · layer")
    expect(heatmap).to_be_visible()
    expect(page.locator(".atsx .toggle input")).to_be_checked()  # colours per head
    label = heatmap.get_attribute("aria-label")
    assert all(f"{i}: {'abcdefghij'[i % 10]}" in label for i in range(60)), label  # every token named


def test_beam_tree_labels_fit_without_overlapping(server: str, page: Page, tmp_path) -> None:
    """Issue 23: the beam tree's node labels, at beam 16 with pruned branches, all inside the figure and
    none on top of another."""
    page.goto(f"{server}/step?sentence={quote_plus('a b c d e f g h')}")
    beam = page.get_by_label("Beam size (1 = greedy, max 16)")
    beam.fill("16")
    beam.press("Enter")
    expect(chart_title(page, "Beam search tree")).to_be_visible()
    settled(page)
    page.get_by_text("Show pruned branches").click()
    tree = page.get_by_test_id("stPlotlyChart").filter(has=chart_title(page, "Beam search tree"))
    expect(tree.locator(".legendtext", has_text="pruned")).to_be_visible()  # the redrawn tree
    settled(page)
    tree.screenshot(path=str(tmp_path / "beam-tree.png"))
    frame = tree.locator("svg.main-svg").first.bounding_box()
    boxes = tree.locator(".textpoint text").evaluate_all(
        "texts => texts.filter(t => t.textContent).map(t => { const b = t.getBoundingClientRect();"
        " return [t.textContent, b.left, b.top, b.right, b.bottom]; })")
    assert len(boxes) > 10
    inside = [b for b in boxes if b[1] >= frame["x"] and b[3] <= frame["x"] + frame["width"]
              and b[2] >= frame["y"] and b[4] <= frame["y"] + frame["height"]]
    assert inside == boxes, [b for b in boxes if b not in inside]
    overlapping = [(a[0], b[0]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
                   if a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5 and a[2] < b[4] - 0.5 and b[2] < a[4] - 0.5]
    assert not overlapping, overlapping
    title = chart_title(page, "Beam search tree").bounding_box()
    assert title["y"] >= frame["y"] - 0.5  # the two-line title is drawn whole
