"""AppTest journey: a zip of a Hugging Face folder uploaded on the Checkpoints page becomes the active model,
and the Translate page runs it; a bad upload is refused in one sentence."""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Callable

from streamlit.testing.v1 import AppTest

from tests.checkpoints import hf_fixtures
from tests.support import page_script, shown


def _zip(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for file in folder.iterdir():
            z.write(file, f"{folder.name}/{file.name}")
    return buffer.getvalue()


def test_a_zipped_hugging_face_folder_becomes_the_active_model(checkpoints_page: AppTest, tmp_path: Path) -> None:
    folder = tmp_path / "opus-mt-en-de"
    folder.mkdir()
    hf_fixtures.marian(folder)
    checkpoints_page.file_uploader(key="import_hf_files").upload("opus-mt-en-de.zip", _zip(folder)).run()
    checkpoints_page.button(key="import_hf_go").click().run()
    assert not checkpoints_page.exception
    assert any("Loaded opus-mt-en-de" in shown(s) for s in checkpoints_page.success)
    assert any("Hugging Face MarianMT" in shown(i) for i in checkpoints_page.info)
    assert checkpoints_page.session_state["checkpoint"] == "opus-mt-en-de"
    checkpoints_page.session_state["sentence"] = "A man rides a bike."
    page = checkpoints_page.switch_page(page_script("Translate")).run()
    assert not page.exception


def test_files_that_are_no_model_are_refused_in_one_sentence(checkpoints_page: AppTest) -> None:
    checkpoints_page.file_uploader(key="import_hf_files").upload("notes.txt", b"hello").run()
    checkpoints_page.button(key="import_hf_go").click().run()
    assert not checkpoints_page.exception
    assert any("Import rejected: upload a Hugging Face folder's files" in shown(e) for e in checkpoints_page.error)


def marian_with_config(folder: Path, change: Callable[[dict], dict]) -> Path:
    """A tiny Marian save_pretrained folder whose config.json went through `change`."""
    folder.mkdir()
    hf_fixtures.marian(folder)
    config = folder / "config.json"
    config.write_text(json.dumps(change(json.loads(config.read_text()))))
    return folder


def test_a_config_that_breaks_transformers_is_one_sentence_not_an_exception_box(checkpoints_page: AppTest,
                                                                                tmp_path: Path) -> None:
    folder = marian_with_config(tmp_path / "opus-mt-en-de", lambda c: {k: v for k, v in c.items() if k != "d_model"})
    checkpoints_page.file_uploader(key="import_hf_files").upload("opus-mt-en-de.zip", _zip(folder)).run()
    checkpoints_page.button(key="import_hf_go").click().run()
    assert not checkpoints_page.exception
    assert any("Import rejected: config.json of opus-mt-en-de has no d_model" in shown(e)
               for e in checkpoints_page.error)


def test_a_hugging_face_folders_files_are_named_by_the_model_not_a_temporary_folder(checkpoints_page: AppTest,
                                                                                     tmp_path: Path) -> None:
    folder = marian_with_config(tmp_path / "model", lambda c: c | {"_name_or_path": "Helsinki-NLP/opus-mt-en-de"})
    uploader = checkpoints_page.file_uploader(key="import_hf_files")
    for file in sorted(folder.iterdir()):
        uploader.upload(file.name, file.read_bytes())
    uploader.run()
    checkpoints_page.button(key="import_hf_go").click().run()
    assert not checkpoints_page.exception and not checkpoints_page.error, [shown(e) for e in checkpoints_page.error]
    assert checkpoints_page.session_state["checkpoint"] == "opus-mt-en-de"
    row = checkpoints_page.dataframe[0].value.set_index("name").loc["opus-mt-en-de"]
    assert row["data"] == "imported Hugging Face MarianMT (MarianTokenizer) from the uploaded files (opus-mt-en-de)"
    assert "attnscope-upload" not in checkpoints_page.dataframe[0].value.to_string()


def test_a_config_nested_thousands_of_levels_deep_is_one_sentence(checkpoints_page: AppTest) -> None:
    """The upload's name is read from its config.json before the import: through the same nesting limit."""
    uploader = checkpoints_page.file_uploader(key="import_hf_files")
    uploader.upload("config.json", b"[" * 5000 + b"]" * 5000)
    uploader.upload("model.safetensors", b"not weights")
    uploader.run()
    checkpoints_page.button(key="import_hf_go").click().run()
    assert not checkpoints_page.exception
    assert any("Import rejected" in shown(e) for e in checkpoints_page.error), [shown(e) for e in checkpoints_page.error]
