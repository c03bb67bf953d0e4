"""Every page runs on models imported from Hugging Face: Marian (a decoder that starts on <pad>, [sin | cos] sinusoids),
BART (learned positions with an offset, LayerNorm on embeddings, byte-level tokens) and NLLB (a forced
language code, a source prefix, pre-LN)."""
from __future__ import annotations

from pathlib import Path

import pytest

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.importers.huggingface import import_hf
from tests.app.conftest import app_on
from tests.checkpoints import hf_fixtures
from tests.support import page_scripts

PAGES = page_scripts(leave_out=("Head atlas", "Train", "Checkpoints"))


@pytest.fixture(scope="module", params=["marian", "bart", "nllb"])
def imported_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp(request.param)
    hf_fixtures.FAMILIES[request.param](folder)
    imported = import_hf(folder, src_lang=hf_fixtures.LANGS[request.param][0], tgt_lang=hf_fixtures.LANGS[request.param][1])
    out = tmp_path_factory.mktemp("checkpoints")
    checkpoint.save(imported.model, imported.bundle, out / f"{request.param}.safetensors")
    return out


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_an_imported_model(imported_dir: Path, page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_on(imported_dir, monkeypatch, "A man rides a red bike.", max_len=8)
    app.switch_page(page).run()
    assert not app.exception, [e.value for e in app.exception]
