"""Every way in: the command line, attnscope.import_model, a zip of the folder, a hub name from the local cache;
and one clear sentence, naming the route that works, for what is not imported."""
from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest
import torch

import attnscope
from attnscope.__main__ import main
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers import import_any
from tests.checkpoints import hf_fixtures


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hf_fixtures.marian(tmp_path_factory.mktemp("opus-mt-en-de"))


def _same(a: attnscope.Translator, b: attnscope.Translator) -> bool:
    text = "A man rides a red bike."
    return a.translate(text, max_len=8).target_ids == b.translate(text, max_len=8).target_ids


def test_the_command_line_imports_a_folder_and_the_app_loads_it(marian: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(marian), "--out", str(tmp_path / "opus.safetensors")]) == 0
    out = capsys.readouterr().out
    assert "Imported as Hugging Face MarianMT (MarianTokenizer)" in out and "Not checked" not in out
    tr = attnscope.load(tmp_path / "opus.safetensors")
    assert (tr.bundle.src_lang, tr.bundle.tgt_lang) == ("en", "de")  # from the tokenizer's config
    assert _same(tr, attnscope.import_model(marian))


def test_without_out_the_import_lands_where_the_checkpoints_page_lists_it(marian: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from attnscope.checkpoints.registry import USER_MODELS_ENV, scan, user_dir
    monkeypatch.setenv(USER_MODELS_ENV, str(tmp_path / "user-models"))
    assert main(["import", str(marian)]) == 0
    written = user_dir() / f"{marian.name}.safetensors"
    assert f"wrote {written}" in capsys.readouterr().out
    entries, _ = scan(user_dir(), "user")
    assert [e.path for e in entries] == [written]


def test_half_storage_reports_whether_it_keeps_the_outputs(marian: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The report counts the sample sentences whose greedy output survives fp16 storage: the engine's decoding of
    the fp16 file agrees with that count (this tiny random model's large weights do move some outputs)."""
    from attnscope.checkpoints.importers.precision import SENTENCES
    assert main(["import", str(marian), "--half", "--out", str(tmp_path / "half.safetensors")]) == 0
    found = re.search(r"fp16 storage (keeps|changes) the greedy outputs \((\d) of 5 sample", capsys.readouterr().out)
    full, half = attnscope.import_model(marian), attnscope.load(tmp_path / "half.safetensors")
    same = sum(full.translate(t, max_len=24).target_ids == half.translate(t, max_len=24).target_ids for t in SENTENCES)
    assert found and int(found[2]) == same and (found[1] == "keeps") == (same == 5)
    for a, b in zip(full.model.parameters(), half.model.parameters()):
        assert torch.equal(a.half().float(), b)


def test_a_zip_of_the_folder_imports_like_the_folder(marian: Path, tmp_path: Path) -> None:
    archive = tmp_path / "opus.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for file in marian.iterdir():
            z.write(file, f"opus-mt-en-de/{file.name}")  # zipped as a folder, as file managers do
    assert _same(attnscope.import_model(archive), attnscope.import_model(marian))


def test_a_zip_cannot_write_outside_its_folder(tmp_path: Path) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("../../escaped.txt", "x")
        z.writestr("config.json", "{}")
    with pytest.raises(CheckpointError, match="has a file outside its folder"):
        import_any(archive)


def _cache(marian: Path, cache: Path, name: str) -> None:
    """huggingface_hub's cache layout: models--org--name/refs/main names the snapshot holding the files."""
    repo = cache / f"models--{name.replace('/', '--')}"
    revision = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    shutil.copytree(marian, repo / "snapshots" / revision)


def test_a_hub_name_is_read_from_the_local_cache_offline(marian: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _cache(marian, tmp_path / "hub", "Helsinki-NLP/opus-mt-en-de")
    imported = import_any("Helsinki-NLP/opus-mt-en-de", cache_dir=tmp_path / "hub")
    assert imported.bundle.summary["name"] == "opus-mt-en-de" and imported.report.family.startswith("Hugging Face MarianMT")
    with pytest.raises(CheckpointError, match="not in the local Hugging Face cache and HF_HUB_OFFLINE is set"):
        import_any("Helsinki-NLP/opus-mt-en-fr", cache_dir=tmp_path / "hub")


def _folder(tmp_path: Path, config: dict) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("config, message", [
    ({"model_type": "umt5", "architectures": ["UMT5ForConditionalGeneration"]},
     "umT5's layers each learn their own relative-position bias.*: record its attention with attnscope.from_generate"),
    ({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]},
     r"GPT2LMHeadModel \(model_type 'gpt2'\) is not one of the families attnscope converts \(MarianMT, BART, mBART, "
     r"M2M100/NLLB, T5, mT5\): record its attention with attnscope.from_generate"),
])
def test_model_types_left_out_name_the_route_that_works(tmp_path: Path, config: dict, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        import_any(_folder(tmp_path, config))


def test_loose_weights_and_folders_given_to_load_get_one_sentence(marian: Path, tmp_path: Path) -> None:
    lone = tmp_path / "model.safetensors"
    shutil.copy(marian / "model.safetensors", lone)
    with pytest.raises(CheckpointError, match="holds a model's weights without its settings: import the whole"):
        import_any(lone)
    with pytest.raises(CheckpointError, match="holds a Hugging Face model's weights, not an attnscope checkpoint"):
        attnscope.load(lone)
    with pytest.raises(CheckpointError, match="is a model folder or hub name, not an attnscope checkpoint"):
        attnscope.load(marian)
    with pytest.raises(CheckpointError, match="n_heads can only be given for a state_dict"):
        import_any(marian, n_heads=4)
    assert import_any(marian / "model.safetensors").report.family.startswith("Hugging Face MarianMT")


def test_multilingual_models_need_their_language_codes(tmp_path: Path) -> None:
    (tmp_path / "nllb").mkdir()
    folder = hf_fixtures.nllb(tmp_path / "nllb")
    with pytest.raises(CheckpointError, match="needs its target language as one of its codes .*deu_Latn"):
        import_any(folder, src_lang="eng_Latn")
    with pytest.raises(CheckpointError, match="'xx' is not one"):
        import_any(folder, src_lang="xx", tgt_lang="deu_Latn")
    tr = attnscope.import_model(folder, src_lang="eng_Latn", tgt_lang="deu_Latn")
    assert (tr.bundle.src_lang, tr.bundle.tgt_lang) == ("eng_Latn", "deu_Latn")
    result = tr.translate("A man rides.", max_len=6)
    assert result.source_tokens[0] == "eng_Latn" and result.steps[0].token == "deu_Latn" and result.steps[0].prob == 1.0


def test_pytorch_model_bin_is_read_without_running_code(marian: Path, tmp_path: Path) -> None:
    """Older folders hold pytorch_model.bin: read with torch.load(weights_only=True), the same model results."""
    from safetensors.torch import load_file
    folder = tmp_path / "bin-folder"
    shutil.copytree(marian, folder)
    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    assert _same(attnscope.import_model(folder), attnscope.import_model(marian))
