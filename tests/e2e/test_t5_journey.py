"""Browser journey: a zip of a T5 folder trained with task prefixes (t5-small's layout, tiny and trained here; nothing
is downloaded) is imported on the Checkpoints page with its language pair, and every page shows it: the prefix the
app adds, T5's position bias on Positional and Inside one head, its RMS norms on Anatomy, every attribution measure."""
from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from attnscope.checkpoints.importers.huggingface import import_hf
from attnscope.engine.decoding.translator import Translator
from tests.checkpoints import t5_fixtures
from tests.e2e.conftest import explorer_map, import_folder, settled, type_sentence

PAGES = {  # the menu's name -> text the page shows only for a T5 model
    "Translate": "Task prefix, added before the sentence",
    "Step through decoding": "Task prefix, added before the sentence",
    "Heads & layers": "Task prefix, added before the sentence",
    "Inside one head": "The position bias is this head's learned number",
    "Attribution": "Attribution",
    "Positional encoding": "Encoder: bias by head and offset",
    "Model anatomy": "RMSNorm",
    "Train": "Train",
    "Checkpoints": "Checkpoints",
}


def test_import_a_t5_and_open_every_page(server: str, page: Page, tmp_path: Path) -> None:
    folder = tmp_path / "t5-tiny"
    folder.mkdir()
    t5_fixtures.t5_v1_0(folder)
    import_folder(page, server, folder, ("en", "de"))

    page.get_by_role("link", name="Translate").click()
    prefix = page.locator("input[aria-label=\"Task prefix, added before the sentence\"]")
    expect(prefix).to_have_value(t5_fixtures.TRAIN_PREFIX)
    box = page.locator("textarea[aria-label=\"Sentence (en)\"]")
    type_sentence(page, box, "A man rides a red bike.")
    imported = import_hf(folder, src_lang="en", tgt_lang="de")
    first = Translator(imported.model, imported.bundle).translate("A man rides a red bike.", max_len=1).source_tokens[0]
    expect(explorer_map(page, "Cross-attention · layer").first).to_have_attribute(  # the prefix's first piece
        "aria-label", re.compile(re.escape(f"Columns (key): 0: {first},")))
    sidebar = page.get_by_test_id("stSidebarUserContent")
    sidebar.get_by_text("Encoder self-attention").click()  # T5's bias is on self-attention's scores, not cross-attention's
    settled(page)
    for name, shown in PAGES.items():
        page.get_by_role("link", name=name).click()
        settled(page)
        expect(page.get_by_text(shown, exact=False).first).to_be_attached()
        expect(page.get_by_test_id("stException")).to_have_count(0)
