"""Browser journey of the Attribution page: only the open tab is drawn, and a sample average started in the
browser stops on the Stop button with the sentences that finished kept (the rerun a click starts is
Streamlit's own, which AppTest can only imitate)."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import settled

SAMPLE = 1000  # every sentence of the sample: minutes for the toy model, so the Stop click lands during the run


def chart_title(page: Page, prefix: str):
    return page.locator(".js-plotly-plot .gtitle", has_text=prefix)


def test_tabs_draw_on_opening_and_a_sample_average_stops_keeping_what_finished(server: str, page: Page) -> None:
    page.goto(f"{server}/attribution?sentence=a+b+c+d")
    expect(chart_title(page, "Where each generated token came from")).to_be_visible()
    expect(chart_title(page, "source tokens by method")).to_have_count(0)  # not computed until its tab opens
    page.get_by_role("tab", name="Source tokens by method").click()
    expect(chart_title(page, "source tokens by method")).to_be_visible()
    page.get_by_role("tab", name="Source vs prefix").click()
    expect(page.get_by_role("button", name=re.compile(r"^Average over the sample \((about \d+|under 1) s for 20 sentences\)$"))
           ).to_be_visible()
    settled(page)
    box = page.get_by_label("Sentences", exact=True)
    box.fill(str(SAMPLE))
    box.press("Enter")
    start = page.get_by_role("button", name=re.compile(rf"^Average over the sample \((about|under) .+ for {SAMPLE} sentences\)$"))
    expect(start).to_be_visible()
    settled(page)
    start.click()
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    stop.click()
    kept = page.get_by_text(re.compile(rf"^Over \d+ of {SAMPLE} sentences"))
    expect(kept.or_(page.get_by_text(f"Over {SAMPLE} sentences"))).to_be_visible()
    if not kept.is_visible():
        pytest.skip("the whole sample finished before the Stop click landed: nothing was left to stop")
    proceed = page.get_by_role("button", name=re.compile(r"^Continue: \d+ more sentences \((about|under) .+\)$"))
    expect(proceed).to_be_visible()
    settled(page)  # the caption, the chart and the button drawn by one run: the Stop click's
    # How many finished depends on the machine's speed: read what the page reports, then check it adds up.
    done = int(re.match(r"Over (\d+) of", kept.inner_text()).group(1))
    remaining = int(re.match(r"Continue: (\d+) more", proceed.inner_text()).group(1))
    assert done > 0 and done + remaining == SAMPLE, (done, remaining)
    expect(chart_title(page, f"Source share by target position · {done} sentences")).to_be_visible()
