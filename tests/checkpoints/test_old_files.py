"""Checkpoints written before a format change still load and translate exactly as they did.

tests/fixtures/old-checkpoints/ holds one small file from each import route (Hugging Face Marian, fairseq,
OpenNMT-py, an nn.Transformer state_dict), written by the code of main at 91e4b92 (format_version 1,
special tokens moved to ids 0-3), and old-checkpoints.json what they and the shipped checkpoints translated
then: ids, tokens, text (greedy and beam 3) and the sum of the greedy cross-attention.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import attnscope
from attnscope.checkpoints.registry import shipped_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "old-checkpoints"
EXPECTED = json.loads((FIXTURES / "old-checkpoints.json").read_text(encoding="utf-8"))


def _path(name: str) -> Path:
    return FIXTURES / f"{name}.safetensors" if name.startswith("import-") else shipped_dir() / f"{name}.safetensors"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_old_checkpoint_translates_as_it_did(name: str) -> None:
    tr = attnscope.load(_path(name))
    for row in EXPECTED[name]:
        result = tr.translate(row["sentence"], beam_size=row["beam"], max_len=12)
        assert list(tr.source(row["sentence"])[0]) == row["source_ids"]
        got = {"text": result.text, "target_ids": list(result.target_ids), "source_tokens": list(result.source_tokens),
               "target_tokens": list(result.target_tokens)}
        assert got == {k: row[k] for k in got}, (name, row["sentence"], row["beam"])
        if row["cross_sum"] is not None:
            assert float(result.attention.cross.astype("float64").sum()) == pytest.approx(row["cross_sum"], rel=1e-6)


def test_the_fixtures_are_the_old_format() -> None:
    from safetensors import safe_open

    for name in (n for n in EXPECTED if n.startswith("import-")):
        with safe_open(str(_path(name)), framework="pt") as f:
            assert f.metadata()["format_version"] == "1", name


def test_a_file_written_now_is_version_2_and_names_its_special_ids(tmp_path: Path) -> None:
    from safetensors import safe_open

    tr = attnscope.load(_path("import-opennmt"))
    path = tr.save(tmp_path / "again.safetensors")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    assert meta["format_version"] == "2"
    assert {k: json.loads(meta["config"])[k] for k in ("pad_id", "bos_id", "eos_id", "unk_id")} == {
        "pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}
    row = EXPECTED["import-opennmt"][0]
    assert attnscope.load(path).translate(row["sentence"], max_len=12).text == row["text"]


def test_a_config_that_names_other_special_ids_than_its_tokenizer_is_refused(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    from tests.support import tensors_and_meta

    path = attnscope.load(_path("import-fairseq")).save(tmp_path / "fs.safetensors")
    tensors, meta = tensors_and_meta(path)
    config = json.loads(meta["config"]) | {"pad_id": 3, "unk_id": 0}  # its tokenizer: <pad> at 0, <unk> at 3
    save_file(tensors, str(path), metadata=meta | {"config": json.dumps(config)})
    with pytest.raises(attnscope.CheckpointError, match="special tokens at"):
        attnscope.load(path)
