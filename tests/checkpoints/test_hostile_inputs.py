"""Malformed and hostile inputs through every import route: each is refused in one sentence that names the
user's input, allocates nothing it cannot afford, reads nothing outside its folder and leaves nothing behind."""
from __future__ import annotations

import re
import tempfile
import zipfile
from pathlib import Path

import pytest

import attnscope
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.uploads import import_uploaded
from tests.checkpoints import hf_fixtures


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hf_fixtures.marian(tmp_path_factory.mktemp("opus-mt-en-de"))


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of this test's own, so that what an import leaves there can be counted."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _zip(folder: Path, archive: Path, inner: str = "opus-mt-en-de/") -> Path:
    with zipfile.ZipFile(archive, "w") as z:
        for file in folder.iterdir():
            z.write(file, f"{inner}{file.name}")
    return archive


def test_zip_imports_and_uploads_leave_nothing_in_the_temp_folder(marian: Path, tmp_path: Path, temp_root: Path) -> None:
    archive = _zip(marian, tmp_path / "opus.zip")
    tr = attnscope.import_model(archive)
    import_uploaded([("opus.zip", archive.read_bytes())])
    import_uploaded([(f.name, f.read_bytes()) for f in marian.iterdir()])
    broken = _zip(marian, tmp_path / "broken.zip")
    with zipfile.ZipFile(broken, "a") as z:
        z.writestr("opus-mt-en-de/config.json", "{not json")
    for route in (lambda: attnscope.import_model(broken), lambda: import_uploaded([("broken.zip", broken.read_bytes())]),
                  lambda: import_uploaded([("config.json", b"{}"), ("vocab.json", b"[]")])):
        with pytest.raises(CheckpointError):
            route()
    assert list(temp_root.iterdir()) == []
    assert tr.translate("A man rides a red bike.", max_len=8).target_tokens  # read in full before its folder went


def test_empty_and_nested_zips_are_named_by_the_users_file(tmp_path: Path, marian: Path, temp_root: Path) -> None:
    empty = tmp_path / "empty.zip"
    zipfile.ZipFile(empty, "w").close()
    nested = tmp_path / "nested.zip"
    with zipfile.ZipFile(nested, "w") as z:
        z.writestr("inner.zip", _zip(marian, tmp_path / "inner.zip").read_bytes())
    for archive, says in ((empty, "empty.zip is an empty zip"),
                          (nested, "nested.zip holds no config.json of a model (a zip inside a zip is not opened")):
        with pytest.raises(CheckpointError, match=re.escape(says)) as err:
            attnscope.import_model(archive)
        assert "attnscope-import" not in str(err.value)


def test_files_zipped_without_their_folder_take_the_zips_name(marian: Path, tmp_path: Path, temp_root: Path) -> None:
    tr = attnscope.import_model(_zip(marian, tmp_path / "opus-flat.zip", inner=""))
    assert tr.bundle.summary["name"] == "opus-flat"


def test_an_archive_is_refused_before_unpacking_when_it_unpacks_to_more_than_the_disk_holds(
        tmp_path: Path, temp_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import namedtuple

    import attnscope.checkpoints.importers.hf_files as hf_files
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("m/model.safetensors", b"\0" * 2**22)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(hf_files.shutil, "disk_usage", lambda _: usage(2**30, 2**30, 2**20))
    with pytest.raises(CheckpointError, match=r"bomb.zip unpacks to 4 MB, more than the free space in the temporary "
                       r"folder \(1 MB\)"):
        attnscope.import_model(archive)
    assert list(temp_root.iterdir()) == []


def _edited(marian: Path, tmp_path: Path, **changes: object) -> Path:
    """A copy of the folder whose config.json has `changes` (None: the field removed)."""
    import json
    import shutil
    folder = Path(shutil.copytree(marian, tmp_path / "edited"))
    config = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        config.pop(key) if value is None else config.__setitem__(key, value)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("changes, message", [
    (dict(d_model=None), r"config.json of edited has no d_model"),
    (dict(d_model="sixteen"), r"edited has d_model 'sixteen': it must be a whole number"),
    (dict(vocab_size=10**10), r"has vocab_size 10,000,000,000, outside what attnscope imports \(1 to 4,194,304\)"),
    (dict(max_position_embeddings=2 * 10**8), r"max_position_embeddings 200,000,000, outside .* \(1 to 65,536\)"),
    (dict(decoder_start_token_id="x"), r"decoder_start_token_id 'x', not a token id below its vocab_size"),
])
def test_config_numbers_are_checked_before_anything_is_allocated(marian: Path, tmp_path: Path, changes: dict,
                                                                 message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from attnscope.model.transformer import Transformer

    def built(*_: object, **__: object) -> None:
        raise AssertionError("a model was built from a config that should have been refused")

    monkeypatch.setattr(Transformer, "__init__", built)  # refused from the numbers alone, before any tensor exists
    with pytest.raises(CheckpointError, match=message):
        attnscope.import_model(_edited(marian, tmp_path, **changes))


def test_a_position_count_beyond_the_limit_is_refused_before_its_table_is_built() -> None:
    from attnscope.model.config import ConfigError, ModelConfig
    with pytest.raises(ConfigError, match="max_len is 200,000,000, more than the 65,536 positions"):
        ModelConfig(src_vocab_size=8, tgt_vocab_size=8, d_model=32, n_heads=4, d_ff=8, max_len=2 * 10**8)


def test_a_model_larger_than_the_available_memory_is_refused_from_its_header_before_a_weight_is_read(
        marian: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import attnscope.checkpoints.importers.hf_files as hf_files
    from attnscope.model import budget

    def unread(*_: object, **__: object) -> None:
        raise AssertionError("a weight was read for a model that should have been refused")

    monkeypatch.setattr(budget, "available_bytes", lambda: 2**12)
    monkeypatch.setattr(hf_files, "read_tensors", unread)
    with pytest.raises(CheckpointError, match=r"^opus-mt-en-de\S* has [\d,]+ weights, which need about 0.0 GB of "
                       r"memory as float32, more than the 0.0 GB this machine has available now: close other programs"):
        attnscope.import_model(marian)


def test_a_deeply_nested_config_is_refused_in_one_sentence(marian: Path, tmp_path: Path) -> None:
    folder = _edited(marian, tmp_path)
    (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointError, match=r"config.json is not valid JSON \(nested 100,000 levels deep"):
        attnscope.import_model(folder)


def test_a_fairseq_checkpoint_cannot_make_the_importer_read_a_file_it_names_elsewhere(tmp_path: Path) -> None:
    from tests.checkpoints import reference_fairseq as ref
    from tests.checkpoints.test_fairseq import SRC_WORDS, write_checkpoint
    elsewhere = tmp_path / "server" / "secret.model"
    elsewhere.parent.mkdir()
    hf_fixtures.train_spm([" ".join(SRC_WORDS)] * 4, elsewhere, 30, "unigram")
    folder = tmp_path / "upload"
    folder.mkdir()
    path = write_checkpoint(folder, ref.args(bpe="sentencepiece", sentencepiece_model=str(elsewhere)))
    imported = attnscope.import_model(path)
    assert type(imported.bundle.src_codec.tokenizer.model).__name__ == "WordLevel"  # the server's file was not read
    (folder / "secret.model").write_bytes(elsewhere.read_bytes())  # the same name beside the checkpoint is its own
    assert type(attnscope.import_model(path).bundle.src_codec.tokenizer.model).__name__ == "Unigram"


def _reweighted(marian: Path, tmp_path: Path, change: object) -> Path:
    """A copy of the folder whose weights went through `change` (a function of the state_dict)."""
    import shutil

    from safetensors.torch import load_file, save_file
    folder = Path(shutil.copytree(marian, tmp_path / "reweighted"))
    state = load_file(str(folder / "model.safetensors"))
    change(state)
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def test_non_finite_weights_are_refused_at_import_not_at_load(marian: Path, tmp_path: Path) -> None:
    key = "model.encoder.layers.0.fc1.weight"
    folder = _reweighted(marian, tmp_path, lambda s: s[key].view(-1)[:3].fill_(float("nan")))
    with pytest.raises(CheckpointError, match=r"the weights encoder.0.ffn.up.weight hold 3 NaN or infinite values"):
        attnscope.import_model(folder)


def test_integer_weights_are_refused_and_float64_ones_import_as_float32(marian: Path, tmp_path: Path) -> None:
    import torch

    def ints(state: dict) -> None:
        state["model.shared.weight"] = state["model.shared.weight"].to(torch.int64)

    with pytest.raises(CheckpointError, match=r"the weights of the source embedding are int64, not floating point"):
        attnscope.import_model(_reweighted(marian, tmp_path / "a", ints))
    wide = attnscope.import_model(_reweighted(marian, tmp_path / "b", lambda s: s.update({k: v.double() for k, v in s.items()})))
    assert all(p.dtype == torch.float32 for p in wide.model.parameters())
    text = "A man rides a red bike."
    assert wide.translate(text, max_len=8).target_ids == attnscope.import_model(marian).translate(text, max_len=8).target_ids


def test_half_storage_that_overflows_is_refused_before_anything_is_written(marian: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from attnscope.__main__ import main
    from attnscope.checkpoints.importers.precision import half_report
    key = "model.encoder.layers.0.fc1.weight"
    folder = _reweighted(marian, tmp_path, lambda s: s[key].mul_(1e5))
    assert main(["import", str(folder), "--half", "--out", str(tmp_path / "half.safetensors")]) == 2
    err = capsys.readouterr().err
    assert "error: fp16 storage would make" in err and "first in encoder.0.ffn.up.weight" in err
    assert not (tmp_path / "half.safetensors").exists()
    imported = attnscope.import_model(folder)
    assert "largest logit change inf" in half_report(imported.model, imported.bundle)  # not 0.0e+00


@pytest.mark.parametrize("source, message", [
    ("", r"no model was given"),
    ("x" * 5000, r"x+…x+ \(5,000 characters\) is neither a file nor a hub name \(File name too long\)"),
    ("Helsinki-NLP/..", r"Helsinki-NLP/.. does not exist: give a model folder"),
    ("owner/" + "n" * 200, r"does not exist: give a model folder"),
])
def test_names_that_are_no_file_and_no_hub_name_get_one_sentence(source: str, message: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError, match=message):
        attnscope.import_model(source)


def test_the_command_line_turns_any_librarys_exception_into_one_line(marian: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from attnscope.__main__ import main
    from attnscope.checkpoints.importers import hf_tokens

    def broken(*_: object) -> None:
        raise KeyError("vocab_size")

    monkeypatch.setattr(hf_tokens, "check_codecs", broken)
    assert main(["import", str(marian), "--out", str(tmp_path / "m.safetensors")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {marian} could not be imported (KeyError: 'vocab_size')")


def test_pickled_objects_in_a_training_checkpoint_are_named_not_called_a_state_dict(tmp_path: Path) -> None:
    import numpy as np
    import torch

    from tests.checkpoints import reference_fairseq as ref
    from tests.checkpoints.test_fairseq import write_checkpoint
    path = write_checkpoint(tmp_path, ref.args())
    data = torch.load(path, weights_only=False)
    data["extra_state"]["best"] = np.float64(4.2)  # fairseq keeps numpy scalars in extra_state
    torch.save(data, path)
    with pytest.raises(CheckpointError, match=r"holds numpy\.\S+ objects besides its weights and settings"):
        attnscope.import_model(path)


def test_an_upload_that_breaks_a_library_gets_one_sentence_naming_it(marian: Path, temp_root: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from attnscope.checkpoints.importers import hf_tokens

    def broken(*_: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(hf_tokens, "check_codecs", broken)
    with pytest.raises(CheckpointError, match=r"the \d+ uploaded files could not be imported \(RecursionError: maximum"):
        import_uploaded([(f.name, f.read_bytes()) for f in marian.iterdir()])
    assert list(temp_root.iterdir()) == []


def test_a_tokenizer_smaller_than_the_output_layer_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import transformers

    from attnscope.__main__ import main
    (tmp_path / "bart").mkdir()
    folder = hf_fixtures.bart(tmp_path / "bart")
    model = transformers.BartForConditionalGeneration.from_pretrained(str(folder))
    size = model.config.vocab_size
    model.resize_token_embeddings(size + 8)
    model.save_pretrained(str(folder))
    with pytest.warns(UserWarning, match=rf"The tokenizer has {size:,} tokens but the output layer has {size + 8:,} rows"):
        attnscope.import_model(folder)
    assert main(["import", str(folder), "--out", str(tmp_path / "b.safetensors")]) == 0
    assert "the 8 rows without a token decode to nothing" in capsys.readouterr().out


def test_an_import_of_any_kind_leaves_nothing_in_the_temp_folder(marian: Path, tmp_path: Path, temp_root: Path) -> None:
    import json

    import torch

    from tests.checkpoints import reference_fairseq as ref
    from tests.checkpoints.test_convert import TutorialSeq2Seq, vocabularies
    from tests.checkpoints.test_fairseq import write_checkpoint
    fairseq = tmp_path / "fairseq"
    fairseq.mkdir()
    checkpoint = write_checkpoint(fairseq, ref.args())
    state_dict = tmp_path / "tutorial.pt"
    torch.save(TutorialSeq2Seq(20, 24).state_dict(), state_dict)
    src, tgt = (tmp_path / "src.json", tmp_path / "tgt.json")
    for path, tokens in zip((src, tgt), vocabularies(20, 24)):
        path.write_text(json.dumps(tokens))
    attnscope.import_model(marian)
    attnscope.import_model(checkpoint)
    import_uploaded([(f.name, f.read_bytes()) for f in fairseq.iterdir()])
    attnscope.import_model(state_dict, src_vocab=src, tgt_vocab=tgt, n_heads=4)
    attnscope.import_model(TutorialSeq2Seq(20, 24), src_vocab=vocabularies(20, 24)[0], tgt_vocab=vocabularies(20, 24)[1])
    assert list(temp_root.iterdir()) == []


def test_a_checkpoint_upload_that_breaks_the_loader_leaves_no_temporary_file(temp_root: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from attnscope.checkpoints import checkpoint, registry

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("unexpected")

    monkeypatch.setattr(checkpoint, "load", broken)
    with pytest.raises(CheckpointError, match=r"mine.safetensors could not be opened \(RuntimeError: unexpected\)"):
        registry.validate_upload(b"\0" * 64, "mine.safetensors")
    assert list(temp_root.iterdir()) == []


def test_a_checkpoint_whose_summary_nests_thousands_of_levels_deep_is_one_sentence(tmp_path: Path) -> None:
    """The summary is JSON in the file's header: read through the same nesting limit as every other file's JSON."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from attnscope.checkpoints.checkpoint import read_bundle
    from tests.support import TOY_CHECKPOINT

    with safe_open(str(TOY_CHECKPOINT), framework="pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    path = tmp_path / "deep.safetensors"
    save_file(tensors, str(path), metadata=meta | {"summary": "[" * 5000 + "]" * 5000})
    with pytest.raises(CheckpointError, match=r"deep.safetensors: its training summary is not valid JSON"):
        read_bundle(path)
