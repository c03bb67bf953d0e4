"""AppTest journeys on the Checkpoints page: list, upload, reject bad files, stay working."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support import shown


class _Boom:
    """Unpickling this would create a marker file: proof that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


@pytest.fixture
def page(app: AppTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("ATTNSCOPE_USER_MODELS", str(tmp_path / "user_models"))
    app.session_state["sentence"] = "a b c"
    app.run()
    return app.switch_page("pages/checkpoints.py").run()


def upload(app: AppTest, name: str, data: bytes) -> AppTest:
    app.get("file_uploader")[0].upload(name, data).run()
    return app


def test_lists_the_available_checkpoint(page: AppTest) -> None:
    table = page.dataframe[0].value
    assert list(table["name"]) == ["toy-reverse"]
    assert not page.exception


def test_upload_a_valid_bundle_makes_it_active_everywhere(page: AppTest, toy_checkpoint_dir: Path) -> None:
    data = (toy_checkpoint_dir / "toy-reverse.safetensors").read_bytes()
    upload(page, "../../My Model!.safetensors", data)
    assert not page.exception
    assert any("Loaded My-Model" in shown(s) for s in page.success)
    assert page.session_state["checkpoint"] == "My-Model"
    assert list(page.dataframe[0].value["name"]) == ["toy-reverse", "My-Model"]
    page.switch_page("pages/translate.py").run()
    assert not page.exception
    assert any(shown(m) == "> c b a" for m in page.markdown)


@pytest.mark.parametrize("name,data,message", [
    ("garbage.safetensors", b"\x00\x01 not a checkpoint at all" * 10, "is not a safetensors file"),
    ("model.pt", b"PK\x03\x04", "is not a .safetensors file"),
])
def test_bad_uploads_are_rejected_and_the_app_keeps_working(page: AppTest, name: str, data: bytes, message: str) -> None:
    upload(page, name, data)
    assert not page.exception
    assert any(message in shown(e) for e in page.error), [shown(e) for e in page.error]
    assert page.session_state["checkpoint"] == "toy-reverse"
    page.switch_page("pages/translate.py").run()
    assert any(shown(m) == "> c b a" for m in page.markdown)


def test_truncated_bundle_is_rejected(page: AppTest, toy_checkpoint_dir: Path) -> None:
    data = (toy_checkpoint_dir / "toy-reverse.safetensors").read_bytes()
    upload(page, "cut.safetensors", data[: len(data) // 2])
    assert any("Upload rejected" in shown(e) for e in page.error)
    assert page.session_state["checkpoint"] == "toy-reverse"


def test_a_pickle_that_would_run_code_is_never_executed(page: AppTest, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    upload(page, "evil.safetensors", pickle.dumps(_Boom(str(marker))))
    assert any("Upload rejected" in shown(e) for e in page.error)
    assert not marker.exists()


def test_uploading_under_a_shipped_name_is_refused(page: AppTest, toy_checkpoint_dir: Path) -> None:
    data = (toy_checkpoint_dir / "toy-reverse.safetensors").read_bytes()
    upload(page, "toy-reverse.safetensors", data)
    assert any("already exists" in shown(e) for e in page.error)


def test_import_an_nn_transformer_state_dict_and_inspect_it(page: AppTest) -> None:
    import io

    import torch

    from tests.test_convert import TutorialSeq2Seq, codecs

    src_codec, tgt_codec = codecs(20, 24)
    torch.manual_seed(0)
    buffer = io.BytesIO()
    torch.save(TutorialSeq2Seq(20, 24).state_dict(), buffer)
    page.file_uploader(key="import_weights").upload("tutorial.pt", buffer.getvalue())
    page.file_uploader(key="import_src_tok").upload("src.json", src_codec.to_json().encode())
    page.file_uploader(key="import_tgt_tok").upload("tgt.json", tgt_codec.to_json().encode())
    page.number_input(key="import_heads").set_value(4)
    page.text_input(key="import_name").set_value("tutorial model").run()
    page.button(key="import_go").click().run()
    assert not page.exception
    assert page.session_state["checkpoint"] == "tutorial-model"
    page.session_state["sentence"] = "s1 s2 s3"
    page.switch_page("pages/translate.py").run()
    assert not page.exception
    assert len(page.get("plotly_chart")) == 6


def test_import_with_a_broken_tokenizer_is_rejected(page: AppTest) -> None:
    page.file_uploader(key="import_weights").upload("x.pt", b"not torch")
    page.file_uploader(key="import_src_tok").upload("src.json", b"{not json").run()
    page.button(key="import_go").click().run()
    assert any("Import rejected" in shown(e) for e in page.error)
    assert page.session_state["checkpoint"] == "toy-reverse"
