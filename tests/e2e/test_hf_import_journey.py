"""Browser journey: a zip of a Hugging Face opus-mt-style folder, imported on the Checkpoints page, translates on
Translate and opens on Step and Inside one head (tiny random Marian model; nothing is downloaded)."""
from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.checkpoints import hf_fixtures
from tests.e2e.conftest import explorer_map, import_folder, settled, type_sentence


def test_import_a_zipped_marian_folder_and_look_inside(server: str, page: Page, tmp_path: Path) -> None:
    folder = tmp_path / "opus-mt-tiny"
    folder.mkdir()
    hf_fixtures.marian(folder)
    import_folder(page, server, folder)
    # the import's own message (the Manage box's details of the now active model say it too)
    alert = page.get_by_test_id("stAlertContentInfo")
    expect(alert.get_by_text("Imported as Hugging Face MarianMT", exact=False)).to_be_visible()

    page.get_by_role("link", name="Translate").click()
    box = page.locator("textarea[aria-label=\"Sentence (en)\"]")
    type_sentence(page, box, "A man rides a red bike.")
    heatmap = explorer_map(page, "Cross-attention · layer").first  # the previous sentence's may be on its way out
    expect(heatmap).to_have_attribute("aria-label", re.compile(r"Columns \(key\): .*<eos>\.$"))  # the source axis: x </s>
    for name in ("Step through decoding", "Inside one head"):
        page.get_by_role("link", name=name).click()
        settled(page)
        expect(page.get_by_test_id("stException")).to_have_count(0)
