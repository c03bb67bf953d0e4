"""A long output in a real browser: its first tokens show while it decodes, Stop keeps them, and the stopped
record's heatmap is drawn (issue 44); a beam search's best hypothesis likewise."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

import pytest
import torch
from playwright.sync_api import Page, expect

from attnscope.checkpoints.checkpoint import save
from attnscope.model.config import EOS_ID
from tests.e2e.conftest import Served, explorer_map, streamlit_server
from tests.engine_fixtures import tiny_translator

BUDGET = 2000  # tokens: seconds of decoding, far more than a click takes (the model never ends by itself)


@pytest.fixture(scope="module")
def long_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose only model is a random one that never produces <eos> and reads BUDGET positions."""
    tr = tiny_translator(0, max_len=BUDGET, d_model=64, d_ff=256)
    with torch.no_grad():
        tr.model.generator.bias[EOS_ID] = -1e4
    folder = tmp_path_factory.mktemp("e2e-long")
    save(tr.model, tr.bundle, folder / "long-output.safetensors")
    env = dict(os.environ, ATTNSCOPE_CHECKPOINTS=str(folder),
               ATTNSCOPE_USER_MODELS=str(tmp_path_factory.mktemp("e2e-long-user")))
    with streamlit_server(env, tmp_path_factory.mktemp("e2e-long-log")) as url:
        yield url


def test_first_tokens_show_stop_keeps_them_and_their_heatmap_draws(long_server: Served, page: Page,
                                                                  tmp_path: Path) -> None:
    page.goto(f"{long_server}/?sentence=a+b+c+d&max_len={BUDGET}")  # its one decode: no other live view to confuse
    live = page.locator(".attn-live")
    expect(live).to_be_visible()  # the first token, while decoding goes on
    expect(live.locator("tbody tr").first).to_be_visible()
    seen = int(live.get_attribute("data-decoded"))
    assert 0 < seen < BUDGET
    page.get_by_role("button", name="Stop").click()
    note = page.get_by_text(re.compile(r"Decoding was stopped after \d+ of at most 2000 tokens"))
    expect(note).to_be_visible()
    kept = int(re.search(r"after (\d+) of", note.inner_text())[1])
    assert seen <= kept < BUDGET
    expect(live).to_have_count(0)
    expect(explorer_map(page, "Cross-attention · layer")).to_be_visible()  # the explorer draws the stopped record
    assert len(page.locator(".attn-translation .txt").inner_text().split()) == kept
    page.screenshot(path=str(tmp_path / "stopped.png"))
    page.get_by_role("link", name="Step through decoding").click()  # the stopped record is every page's
    expect(page.get_by_text(f"Decoding was stopped after {kept} of at most {BUDGET} tokens")).to_be_visible()


def test_a_beam_search_shows_its_best_hypothesis_and_stop_keeps_it(long_server: Served, page: Page) -> None:
    page.goto(f"{long_server}/?sentence=a+b+c+d&max_len={BUDGET}&beam=3")
    live = page.locator(".attn-live")
    expect(live.locator("tbody tr").first).to_be_visible()  # the best hypothesis' rows, while the search goes on
    expect(live).to_contain_text("Beam search (3 hypotheses): step")
    seen = int(live.get_attribute("data-decoded"))
    assert 0 < seen < BUDGET
    page.get_by_role("button", name="Stop").click()
    note = page.get_by_text(re.compile(r"Beam search \(beam of 3\) was stopped after \d+ of at most 2000 steps"))
    expect(note).to_be_visible()
    kept = int(re.search(r"after (\d+) of", note.inner_text())[1])
    assert seen <= kept < BUDGET
    expect(live).to_have_count(0)
    expect(explorer_map(page, "Cross-attention · layer")).to_be_visible()
    # nothing finishes (<eos> is never likely): the best hypothesis is one still in the beam, one token a step
    assert len(page.locator(".attn-translation .txt").inner_text().split()) == kept
