"""A T5's task prefix chosen at import, saved, read back and applied; T5 folders from a zip; T5 configs refused.

The model is t5_fixtures.t5_v1_0 untrained (what the import reads does not depend on the weights): t5-small's
task_specific_params name a summarisation task and two translation pairs, English to German and to French.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors import safe_open

import attnscope
from attnscope.__main__ import main
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.hf_families import t5 as hf_t5
from attnscope.checkpoints.importers.huggingface import import_hf
from tests.checkpoints.hf_fixtures import EN, transformers
from tests.checkpoints.t5_fixtures import PREFIXES, t5_v1_0

GERMAN, FRENCH = PREFIXES["translation_en_to_de"]["prefix"], PREFIXES["translation_en_to_fr"]["prefix"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("t5") / "t5-small-ish"
    path.mkdir()
    return t5_v1_0(path, trained=False)


def edited(folder: Path, tmp_path: Path, **changes: Any) -> Path:
    """A copy of the folder whose config.json has `changes` (None removes a field)."""
    copy = Path(shutil.copytree(folder, tmp_path / folder.name))
    config = json.loads((copy / "config.json").read_text())
    config = {k: v for k, v in (config | changes).items() if v is not None}
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def test_the_languages_choose_the_translation_task(folder: Path) -> None:
    for (src, tgt), prefix in (("en", "de"), GERMAN), (("en", "fr"), FRENCH):
        imported = import_hf(folder, src_lang=src, tgt_lang=tgt)
        bundle = imported.bundle
        assert (bundle.task_prefix, bundle.src_lang, bundle.tgt_lang) == (prefix, src, tgt)
        assert any(repr(prefix) in line for line in imported.report.lines())


@pytest.mark.parametrize("langs, message", [
    ((None, None), "translates several language pairs, each with its own task prefix: pass one of en de, en fr"),
    (("en", "ro"), "trained to translate en de, en fr .* not en to ro: pass one of these pairs as --src-lang/--tgt-lang"),
])
def test_no_pair_or_another_pair_is_refused_naming_the_pairs(folder: Path, langs: tuple, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        import_hf(folder, src_lang=langs[0], tgt_lang=langs[1])


def test_the_only_translation_task_is_chosen_and_none_gives_no_prefix(folder: Path, tmp_path: Path) -> None:
    one = edited(folder, tmp_path / "one", task_specific_params={k: v for k, v in PREFIXES.items() if "fr" not in k})
    bundle = import_hf(one).bundle
    assert (bundle.task_prefix, bundle.src_lang, bundle.tgt_lang) == (GERMAN, "en", "de")
    none = edited(folder, tmp_path / "none", task_specific_params={"summarization": PREFIXES["summarization"]})
    assert import_hf(none).bundle.task_prefix == ""
    assert import_hf(edited(folder, tmp_path / "absent", task_specific_params=None)).bundle.task_prefix == ""


def test_the_prefix_is_saved_read_back_and_applied(folder: Path, tmp_path: Path) -> None:
    imported = import_hf(folder, src_lang="en", tgt_lang="fr")
    path = attnscope.Translator(imported.model, imported.bundle).save(tmp_path / "t5.safetensors")
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata()["task_prefix"] == FRENCH
    translator = attnscope.load(path)
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    text = EN[2]
    assert translator.bundle.task_prefix == FRENCH
    assert translator.source(text)[0] == tok(FRENCH + text)["input_ids"]
    assert translator.source(text, task_prefix="")[0] == tok(text)["input_ids"]
    assert translator.source(text, task_prefix=GERMAN)[0] == tok(GERMAN + text)["input_ids"]
    for prefix in (None, "", GERMAN):
        one = translator.translate(text, max_len=6, capture=False, task_prefix=prefix)
        expected = translator.source(text, prefix)[0]
        assert list(one.source_ids) == expected
        assert translator.translate_batch([text], max_len=6, task_prefix=prefix) == [one.text]
        assert list(translator.score(text, "Hallo", task_prefix=prefix).source_ids) == expected
        assert list(translator.hypothesis(text, [5, 1], task_prefix=prefix).source_ids) == expected
    unprefixed = dataclasses.replace(imported.bundle, task_prefix="")
    old = attnscope.Translator(imported.model, unprefixed).save(tmp_path / "o.safetensors")
    with safe_open(str(old), framework="pt") as f:
        assert "task_prefix" not in f.metadata()  # as in files written before the field: no prefix
    assert attnscope.load(old).bundle.task_prefix == ""


def test_the_command_line_says_and_changes_the_prefix(folder: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    imported = import_hf(folder, src_lang="en", tgt_lang="de")
    assert any(line.endswith("(change it with translate --task-prefix, or under the app's sentence box).")
               for line in imported.report.lines())
    path = attnscope.Translator(imported.model, imported.bundle).save(tmp_path / "t5.safetensors")
    assert main(["translate", EN[0], "--checkpoint", str(path), "--max-len", "4"]) == 0
    assert repr(GERMAN) in capsys.readouterr().err
    assert main(["translate", EN[0], "--checkpoint", str(path), "--max-len", "4", "--task-prefix", ""]) == 0
    assert "before the sentence" not in capsys.readouterr().err


def test_the_readmes_command_imports_it(folder: Path, tmp_path: Path) -> None:
    """`python -m attnscope import FOLDER --src-lang en --tgt-lang de --out FILE`, as docs/importing.md gives it;
    without the pair, one sentence naming the pairs and no file."""
    out = tmp_path / "t5-en-de.safetensors"
    assert main(["import", str(folder), "--src-lang", "en", "--tgt-lang", "de", "--out", str(out)]) == 0
    loaded = attnscope.load(out)
    assert loaded.bundle.task_prefix == GERMAN and loaded.model.config.positional == "relative"
    refused = tmp_path / "refused.safetensors"
    assert main(["import", str(folder), "--out", str(refused)]) != 0 and not refused.exists()


def test_a_zip_of_the_folder_imports_the_same_model(folder: Path, tmp_path: Path) -> None:
    archive = tmp_path / "t5.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for file in folder.iterdir():
            z.write(file, f"{folder.name}/{file.name}")
    zipped, plain = import_hf(archive, src_lang="en", tgt_lang="de"), import_hf(folder, src_lang="en", tgt_lang="de")
    assert zipped.bundle.task_prefix == GERMAN and zipped.bundle.config == plain.bundle.config
    ours, theirs = zipped.model.state_dict(), plain.model.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)


@pytest.mark.parametrize("changes, message", [
    (dict(model_type="umt5"), "umT5's layers each learn their own relative-position bias"),
    (dict(model_type="longt5"), "LongT5's local attention"),
    (dict(feed_forward_proj="gated-tanh"), "feed_forward_proj 'gated-tanh' is not a feed-forward network attnscope"),
    (dict(feed_forward_proj="relu-gelu"), "feed_forward_proj 'relu-gelu' is not"),
    (dict(d_kv=None), "has no d_kv: it is not a complete Hugging Face model config"),
    (dict(num_heads=0), "has num_heads 0, outside what attnscope imports"),
    (dict(relative_attention_num_buckets=2.5), "relative_attention_num_buckets 2.5: it must be a whole number"),
    (dict(relative_attention_num_buckets=2), "relative_buckets must be between 4 and 1024"),
    (dict(layer_norm_epsilon="small"), "layer_norm_epsilon 'small', not a number"),
    (dict(task_specific_params={"translation_en_to_de": {"prefix": 3}}), "gives translation_en_to_de the prefix 3"),
])
def test_unusable_t5_configs_are_refused_in_one_sentence(folder: Path, tmp_path: Path, changes: dict,
                                                         message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        import_hf(edited(folder, tmp_path, **changes), src_lang="en", tgt_lang="de")


@pytest.mark.parametrize("config, scaled", [
    ({"model_type": "t5"}, True), ({"model_type": "t5", "tie_word_embeddings": True}, True),
    ({"model_type": "t5", "tie_word_embeddings": False}, False),
    ({"model_type": "t5", "tie_word_embeddings": False, "scale_decoder_outputs": True}, True),  # transformers 5's file
    ({"model_type": "t5", "tie_word_embeddings": True, "scale_decoder_outputs": False}, False),
    ({"model_type": "mt5"}, False), ({"model_type": "mt5", "tie_word_embeddings": True}, False),
])
def test_the_output_rescale_is_decided_as_transformers_decides_it(config: dict, scaled: bool) -> None:
    assert hf_t5.scale_output(config) == scaled
    if config["model_type"] == "t5":
        fields = {k: v for k, v in config.items() if k != "model_type"}
        assert transformers.T5Config(**fields).scale_decoder_outputs == scaled
