"""Browser journeys for model management: upload a checkpoint, watch a toy model train live."""
from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from attnscope.ui.train.form import MAX_EPOCHS
from tests.e2e.conftest import explorer_map, type_sentence, upload


def test_upload_a_checkpoint_and_translate_with_it(server: str, page: Page, e2e_checkpoint: Path) -> None:
    page.goto(server)
    page.get_by_role("link", name="Checkpoints").click()
    upload(page, e2e_checkpoint, "it is now the active checkpoint on every page")
    page.get_by_role("link", name="Translate").click()
    box = page.locator("textarea[aria-label=\"Sentence (en)\"]")
    type_sentence(page, box, "c d e")
    expect(page.get_by_text("e d c")).to_be_visible()


def test_bad_upload_shows_a_message_and_the_app_keeps_working(server: str, page: Page, tmp_path: Path) -> None:
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(b"definitely not a checkpoint")
    page.goto(server)
    page.get_by_role("link", name="Checkpoints").click()
    upload(page, bad, "Upload rejected")
    page.get_by_role("link", name="Translate").click()
    expect(explorer_map(page, "Cross-attention · layer")).to_be_visible()


def test_live_training_progress_then_stop_keeps_a_validated_checkpoint(server: str, page: Page) -> None:
    """Waits for events, not for a run to finish: a step shows live, Stop validates and publishes.
    The run is set to the most epochs of the smallest batches (hundreds of thousands of steps), so it
    is still going when Stop is pressed however fast it trains."""
    page.goto(server)
    page.get_by_role("link", name="Train").click()
    page.get_by_label("Run name").fill("browser-copy")
    for label, value in ((r"^Epochs", MAX_EPOCHS), (r"^Batch size", 100)):
        box = page.get_by_label(re.compile(label))
        box.fill(str(value))
        box.press("Enter")
        expect(box).to_have_value(str(value))
    page.get_by_role("button", name="Start new").click()
    expect(page.get_by_text(re.compile(r"running: step [1-9]")).first).to_be_visible()  # live progress
    expect(page.get_by_text("Learning curves").first).to_be_visible()  # .first: a redrawn fragment briefly shows two
    page.get_by_role("button", name="Stop").click()
    expect(page.get_by_text("Saved as browser-copy").first).to_be_visible()  # a checkpoint was written...
    expect(page.get_by_text("Attention at validation").first).to_be_visible()  # ...after a validation
    expect(page.get_by_text(re.compile(r"stopped: step")).first).to_be_visible()
