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


STOPPED = {1: r"Decoding was stopped after (\d+) of at most 2000 tokens",
           3: r"Beam search \(beam of 3\) was stopped after (\d+) of at most 2000 steps"}  # the note, by beam size


@pytest.mark.parametrize("beam", [1, 3])
def test_first_tokens_show_stop_keeps_them_and_their_heatmap_draws(long_server: Served, page: Page, tmp_path: Path,
                                                                  beam: int) -> None:
    """Greedy, and a beam search showing its best hypothesis so far: <eos> is never likely, so nothing finishes and
    the best is one still in the beam, one token a step."""
    page.goto(f"{long_server}/?sentence=a+b+c+d&max_len={BUDGET}&beam={beam}")  # its one decode: no other live view
    live = page.locator(".attn-live")
    expect(live).to_be_visible()  # the first token, while decoding goes on
    expect(live.locator("tbody tr").first).to_be_visible()
    if beam > 1:
        expect(live).to_contain_text(f"Beam search ({beam} hypotheses): step")
    seen = int(live.get_attribute("data-decoded"))
    assert 0 < seen < BUDGET
    page.get_by_role("button", name="Stop").click()
    note = page.get_by_text(re.compile(STOPPED[beam]))
    expect(note).to_be_visible()
    kept = int(re.search(STOPPED[beam], note.inner_text())[1])
    assert seen <= kept < BUDGET
    expect(live).to_have_count(0)
    expect(explorer_map(page, "Cross-attention · layer")).to_be_visible()  # the explorer draws the stopped record
    assert len(page.locator(".attn-translation .txt").inner_text().split()) == kept
    page.screenshot(path=str(tmp_path / "stopped.png"))
    page.get_by_role("link", name="Step through decoding").click()  # the stopped record is every page's
    expect(page.get_by_text(re.compile(STOPPED[beam].replace(r"(\d+)", str(kept))))).to_be_visible()
