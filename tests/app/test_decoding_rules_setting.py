"""The decoding settings say which rules decode, in one sentence, and offer attnscope's own for a model imported
with its framework's rules (here a Marian model whose generation_config allows 6 tokens with the start token)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.importers.huggingface import import_hf
from tests.app.conftest import app_on
from tests.checkpoints import hf_fixtures
from tests.support import page_script, shown


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = hf_fixtures.marian(tmp_path_factory.mktemp("marian"))
    config = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps({**config, "max_length": 6}))
    imported = import_hf(folder, src_lang="en", tgt_lang="de")
    out = tmp_path_factory.mktemp("checkpoints")
    checkpoint.save(imported.model, imported.bundle, out / "marian.safetensors")
    return out


def translate_page(folder: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    return app_on(folder, monkeypatch, "A man rides a red bike.").switch_page(page_script("Translate")).run()


def rules_said(app: AppTest) -> list[str]:
    return [shown(c) for c in app.caption if shown(c).startswith("Decoding follows ")]


def test_an_imported_model_decodes_by_its_rules_and_offers_attnscopes(marian_dir: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    app = translate_page(marian_dir, monkeypatch)
    assert not app.exception, [e.value for e in app.exception]
    radio = next(r for r in app.radio if r.label == "Decoding rules")
    assert radio.value == "model" and radio.options == ["the model's (generation_config)", "attnscope's own"]
    assert rules_said(app) == ["Decoding follows the model's generation_config: at most 5 tokens; </s> forced at that "
                               "limit; beams ranked by log-prob / length^1; the search ends when no live beam can beat "
                               "the worst of beam-size finished ones."]
    radio.set_value("attnscope").run()
    assert not app.exception, [e.value for e in app.exception]
    assert rules_said(app)[0].startswith("Decoding follows attnscope: at most 2 x the source + 10 tokens")
    assert app.session_state["rules"] == "attnscope"


def test_a_model_trained_here_names_attnscopes_rules_without_a_choice(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c"
    app.run()
    app.switch_page(page_script("Translate")).run()
    assert not [r for r in app.radio if r.label == "Decoding rules"]
    assert rules_said(app) == ["Decoding follows attnscope: at most 2 x the source + 10 tokens; beams ranked by "
                               "log-prob / length^1; the search ends once beam-size hypotheses have ended in </s>."]
