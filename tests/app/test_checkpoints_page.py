"""AppTest journeys on the Checkpoints checkpoints_page: list, upload, reject bad files, stay working."""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support import (
    distinct_toy_checkpoint,
    explorers,
    log_problems,
    page_script,
    shown,
    tensors_and_meta,
    translation_shown,
    unexplained_columns,
)


class _Boom:
    """Unpickling this would create a marker file: proof that code ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def upload(app: AppTest, name: str, data: bytes) -> AppTest:
    app.get("file_uploader")[0].upload(name, data).run()
    return app


def test_lists_the_available_checkpoint(checkpoints_page: AppTest) -> None:
    table = checkpoints_page.dataframe[0].value
    assert list(table["name"]) == ["toy-reverse"]
    assert not checkpoints_page.exception
    assert not unexplained_columns(checkpoints_page.dataframe[0])


def mine(tmp_path: Path) -> bytes:
    """The toy model in a file of its own (other bytes than the installed toy-reverse)."""
    return distinct_toy_checkpoint(tmp_path / "mine", "mine").read_bytes()


def test_upload_a_valid_bundle_makes_it_active_everywhere(checkpoints_page: AppTest, tmp_path: Path) -> None:
    upload(checkpoints_page, "../../My Model!.safetensors", mine(tmp_path))
    assert not checkpoints_page.exception
    assert any("Loaded My-Model" in shown(s) for s in checkpoints_page.success)
    assert checkpoints_page.session_state["checkpoint"] == "My-Model"
    assert list(checkpoints_page.dataframe[0].value["name"]) == ["toy-reverse", "My-Model"]
    assert checkpoints_page.selectbox(key="manage_name").value == "My-Model"  # Manage shows the active model
    checkpoints_page.switch_page(page_script("Translate")).run()
    assert not checkpoints_page.exception
    assert translation_shown(checkpoints_page).text == "c b a"


@pytest.mark.parametrize("name,data,message", [
    ("garbage.safetensors", b"\x00\x01 not a checkpoint at all" * 10,
     "garbage.safetensors is not a safetensors file: its first bytes are not the header a .safetensors file starts with"),
    ("model.pt", b"PK\x03\x04", "is not a .safetensors file but a PyTorch file: import it"),
    ("random.pt", bytes(range(256)) * 4, "random.pt is not a PyTorch checkpoint"),
])
def test_bad_uploads_are_rejected_and_the_app_keeps_working(checkpoints_page: AppTest, name: str, data: bytes,
                                                            message: str) -> None:
    upload(checkpoints_page, name, data)
    assert not checkpoints_page.exception
    assert any(message in shown(e) for e in checkpoints_page.error), [shown(e) for e in checkpoints_page.error]
    assert not any("unpickl" in shown(e) or "deserializing" in shown(e) for e in checkpoints_page.error)
    assert checkpoints_page.session_state["checkpoint"] == "toy-reverse"
    checkpoints_page.switch_page(page_script("Translate")).run()
    assert translation_shown(checkpoints_page).text == "c b a"


def test_the_upload_limit_the_page_states_is_the_uploaders(checkpoints_page: AppTest) -> None:
    from attnscope.checkpoints import registry

    limit = registry.MAX_UPLOAD_BYTES // 2**20
    assert any(f"at most {limit} MB" in shown(c) for c in checkpoints_page.caption)
    assert checkpoints_page.get("file_uploader")[0].proto.max_upload_size_mb == limit  # was the server's 1 GB
    assert checkpoints_page.file_uploader(key="import_weights").proto.max_upload_size_mb == limit


def test_truncated_bundle_is_rejected(checkpoints_page: AppTest, toy_checkpoint_dir: Path) -> None:
    data = (toy_checkpoint_dir / "toy-reverse.safetensors").read_bytes()
    upload(checkpoints_page, "cut.safetensors", data[: len(data) // 2])
    assert any("Upload rejected" in shown(e) for e in checkpoints_page.error)
    assert checkpoints_page.session_state["checkpoint"] == "toy-reverse"


def test_a_pickle_that_would_run_code_is_never_executed(checkpoints_page: AppTest, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    upload(checkpoints_page, "evil.safetensors", pickle.dumps(_Boom(str(marker))))
    assert any("Upload rejected" in shown(e) for e in checkpoints_page.error)
    assert not marker.exists()


def test_another_model_under_a_shipped_name_is_refused(checkpoints_page: AppTest, tmp_path: Path) -> None:
    upload(checkpoints_page, "toy-reverse.safetensors", mine(tmp_path))
    assert any("already exists" in shown(e) for e in checkpoints_page.error)
    assert not any("'" in shown(e) for e in checkpoints_page.error)  # the name as typed, not Python's repr


@pytest.mark.parametrize("filename", ["toy-reverse.safetensors", "a copy of it.safetensors"])
def test_a_file_identical_to_an_installed_model_switches_to_it(checkpoints_page: AppTest, toy_checkpoint_dir: Path,
                                                               tmp_path: Path, filename: str) -> None:
    upload(checkpoints_page, "mine.safetensors", mine(tmp_path))
    assert checkpoints_page.session_state["checkpoint"] == "mine"
    checkpoints_page.get("file_uploader")[0].clear().run()
    upload(checkpoints_page, filename, (toy_checkpoint_dir / "toy-reverse.safetensors").read_bytes())
    assert not checkpoints_page.exception and not checkpoints_page.error, [shown(e) for e in checkpoints_page.error]
    assert checkpoints_page.session_state["checkpoint"] == "toy-reverse"
    assert any("identical to toy-reverse (the same SHA-256)" in shown(s) for s in checkpoints_page.success)
    assert list(checkpoints_page.dataframe[0].value["name"]) == ["toy-reverse", "mine"]  # no second copy
    assert checkpoints_page.selectbox(key="manage_name").value == "toy-reverse"


def _m1_upload(checkpoints_page: AppTest) -> list[int]:
    """Upload an M1-style (PyTorch tutorial) state_dict with torchtext-style JSON vocabularies; its greedy ids."""
    import io

    import torch

    from tests.byom_models import WORDS, Seq2SeqTransformer, m1_greedy_decode, m1_source, m1_vocab

    torch.manual_seed(0)
    model = Seq2SeqTransformer(1, 1, 16, 4, len(m1_vocab(WORDS)), len(m1_vocab(WORDS)), 32).eval()
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    checkpoints_page.file_uploader(key="import_weights").upload("tutorial.pt", buffer.getvalue())
    checkpoints_page.file_uploader(key="import_src_tok").upload("de.json", json.dumps(m1_vocab(WORDS)).encode())
    checkpoints_page.file_uploader(key="import_tgt_tok").upload("en.json", json.dumps(m1_vocab(WORDS)).encode()).run()
    return m1_greedy_decode(model, m1_source(m1_vocab(WORDS), "Zwei Hunde ."), 6)


def test_import_an_nn_transformer_state_dict_and_inspect_it(checkpoints_page: AppTest, server_log) -> None:
    _m1_upload(checkpoints_page)
    checkpoints_page.number_input(key="import_heads").set_value(4)
    checkpoints_page.text_input(key="import_name").set_value("tutorial model").run()
    checkpoints_page.button(key="import_go").click().run()
    assert not checkpoints_page.exception and not checkpoints_page.error
    assert checkpoints_page.session_state["checkpoint"] == "tutorial-model"
    assert checkpoints_page.selectbox(key="manage_name").value == "tutorial-model"  # Manage shows the active model
    assert not log_problems(server_log), log_problems(server_log)  # e.g. pyarrow's ArrowInvalid on a mixed column
    table = checkpoints_page.dataframe[0].value.set_index("name")
    steps = table["saved at step"]
    assert steps.loc["toy-reverse"] == 638 and steps.isna().loc["tutorial-model"]  # no steps: empty
    assert any("Not checked" in shown(w) and "n_heads=4" in shown(w) for w in checkpoints_page.warning)
    checkpoints_page.session_state["sentence"] = "Zwei Hunde ."
    checkpoints_page.switch_page(page_script("Translate")).run()
    assert not checkpoints_page.exception
    (sent,) = explorers(checkpoints_page)  # every kind, in the browser
    assert sent.header["source"][1:3] == ["Zwei", "Hunde"]


def test_a_check_with_the_models_own_outputs_catches_wrong_heads(checkpoints_page: AppTest) -> None:
    ids = _m1_upload(checkpoints_page)
    checkpoints_page.number_input(key="import_heads").set_value(2)
    checkpoints_page.text_area(key="import_check").set_value(f"Zwei Hunde . ||| {ids}").run()
    checkpoints_page.button(key="import_go").click().run()
    assert any("n_heads=4 (not 2)" in shown(e) for e in checkpoints_page.error)
    assert checkpoints_page.session_state["checkpoint"] == "toy-reverse"
    checkpoints_page.number_input(key="import_heads").set_value(4).run()
    checkpoints_page.button(key="import_go").click().run()
    assert checkpoints_page.session_state["checkpoint"] == "imported-transformer"
    assert any("reproduces your model's outputs on all 1 examples" in shown(i) for i in checkpoints_page.info)


@pytest.mark.parametrize("specials,message", [
    ("pad", "Special tokens must look like pad=<blank>,bos=<s> (role=token, commas between), got pad"),
    ("pad=<blnk>", "has no token <blnk> (22 tokens): correct pad=<blnk> in the special tokens"),
    ("start=<s>", "unknown special token role start: use pad, bos, eos, unk, e.g. pad=<blank>"),
])
def test_import_errors_speak_the_forms_syntax(checkpoints_page: AppTest, specials: str, message: str) -> None:
    _m1_upload(checkpoints_page)
    checkpoints_page.text_input(key="import_specials").set_value(specials).run()
    checkpoints_page.button(key="import_go").click().run()
    errors = [shown(e) for e in checkpoints_page.error]
    assert any(message in e for e in errors) and not any("'" in e or "{" in e for e in errors), errors


def test_import_of_random_bytes_says_it_is_not_a_pytorch_checkpoint(checkpoints_page: AppTest) -> None:
    _m1_upload(checkpoints_page)
    checkpoints_page.file_uploader(key="import_weights").upload("weights.pt", bytes(range(256)) * 4).run()
    checkpoints_page.button(key="import_go").click().run()
    errors = [shown(e) for e in checkpoints_page.error]
    assert any("weights.pt is not a PyTorch checkpoint" in e for e in errors) and not any("unpickl" in e for e in errors)


def test_import_with_a_broken_tokenizer_is_rejected(checkpoints_page: AppTest) -> None:
    checkpoints_page.file_uploader(key="import_weights").upload("x.pt", b"not torch")
    checkpoints_page.file_uploader(key="import_src_tok").upload("src.json", b"{not json").run()
    checkpoints_page.button(key="import_go").click().run()
    assert any("Import rejected" in shown(e) for e in checkpoints_page.error)
    assert checkpoints_page.session_state["checkpoint"] == "toy-reverse"


def _damaged(source: Path, tensors=lambda t: t, meta=lambda m: {}) -> bytes:
    """The toy bundle with its tensors replaced and metadata fields overridden, as bytes."""
    from safetensors.torch import save

    t, m = tensors_and_meta(source)
    return save(tensors(t), metadata=m | meta(m))


def _absurd_config(m: dict[str, str]) -> dict[str, str]:
    return {"config": json.dumps(json.loads(m["config"]) | {"d_model": 1_000_000, "d_ff": 4_000_000})}


HUGE_HEADER = (2**62).to_bytes(8, "little") + b"{}"  # claims an exabyte-sized header
HUGE_TENSOR = (b'{"w":{"dtype":"F32","shape":[100000,100000],"data_offsets":[0,40000000000]}}')
HUGE_TENSOR = len(HUGE_TENSOR).to_bytes(8, "little") + HUGE_TENSOR  # 40 GB declared, nothing stored


@pytest.mark.parametrize("case,make,message", [
    ("huge header", lambda src: HUGE_HEADER, "is not a safetensors file"),
    ("huge tensor, no data", lambda src: HUGE_TENSOR, "is not a safetensors file"),
    ("misshaped tensor", lambda src: _damaged(src, tensors=lambda t: t | {"generator.bias": t["generator.bias"][:3]}),
     "generator.bias has shape"),
    ("missing tensor", lambda src: _damaged(src, tensors=lambda t: {k: v for k, v in t.items() if k != "generator.bias"}),
     "missing tensor generator.bias"),
    ("extra tensor", lambda src: _damaged(src, tensors=lambda t: t | {"extra": t["generator.bias"].clone()}),
     "unexpected tensor extra"),
    ("config field of the wrong type",
     lambda src: _damaged(src, meta=lambda m: {"config": '{"src_vocab_size": "many", "tgt_vocab_size": 1}'}), "must be int"),
    ("summary of the wrong type", lambda src: _damaged(src, meta=lambda m: {"summary": "[1, 2]"}), "must be a JSON object"),
    ("absurd sizes", lambda src: _damaged(src, meta=_absurd_config), "weights, which need about"),
    ("tokenizer that does not parse", lambda src: _damaged(src, meta=lambda m: {"tgt_tokenizer": "{\"model\": "}),
     "does not parse"),
])
def test_hostile_files_are_rejected_in_one_sentence_and_the_active_model_stays(
        checkpoints_page: AppTest, toy_checkpoint_dir: Path, case: str, make, message: str) -> None:
    upload(checkpoints_page, "hostile.safetensors", make(toy_checkpoint_dir / "toy-reverse.safetensors"))
    assert not checkpoints_page.exception, case
    errors = [shown(e) for e in checkpoints_page.error]
    assert len(errors) == 1 and errors[0].startswith("Upload rejected") and message in errors[0], (case, errors)
    assert "\n" not in errors[0] and "Traceback" not in errors[0]
    assert checkpoints_page.session_state["checkpoint"] == "toy-reverse"
    assert list(checkpoints_page.dataframe[0].value["name"]) == ["toy-reverse"]  # nothing was stored
    checkpoints_page.switch_page(page_script("Translate")).run()
    assert translation_shown(checkpoints_page).text == "c b a"



def test_an_oversized_upload_is_refused_with_the_limit(checkpoints_page: AppTest, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from attnscope.checkpoints import registry
    monkeypatch.setattr(registry, "MAX_UPLOAD_BYTES", 1000)
    checkpoints_page.run()  # the uploader states the limit (its widget changes with it)
    upload(checkpoints_page, "big.safetensors", mine(tmp_path))
    assert any("the limit is" in shown(e) for e in checkpoints_page.error), [shown(e) for e in checkpoints_page.error]
    assert checkpoints_page.session_state["checkpoint"] == "toy-reverse"


def test_an_absolute_path_name_is_stored_under_its_stem_only(checkpoints_page: AppTest, tmp_path: Path) -> None:
    upload(checkpoints_page, "/etc/cron.d/evil.safetensors", mine(tmp_path))
    assert checkpoints_page.session_state["checkpoint"] == "evil"
    stored = checkpoints_page.session_state["session_models_dir"].path / "evil.safetensors"
    assert stored.is_file() and not Path("/etc/cron.d/evil.safetensors").exists()


def test_a_sessions_uploads_go_when_the_session_ends(checkpoints_page: AppTest, tmp_path: Path) -> None:
    """An upload can be 300 MB: its folder lasts as long as the session's state holds it."""
    import gc

    upload(checkpoints_page, "mine.safetensors", mine(tmp_path))
    folder = checkpoints_page.session_state["session_models_dir"].path
    assert (folder / "mine.safetensors").is_file() and folder.name.startswith(f"attnscope-session-{os.getpid()}-")
    checkpoints_page.session_state["session_models_dir"] = None  # what the end of a session does to its state
    gc.collect()
    assert not folder.exists()
