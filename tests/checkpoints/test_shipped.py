"""The checkpoints we ship load and translate sensibly (no download, no data needed)."""
from __future__ import annotations

import pytest
import torch

import attnscope
from attnscope.checkpoints.registry import shipped_dir
from tests.support import tensors_and_meta


def test_the_default_checkpoint_translates_a_known_sentence() -> None:
    tr = attnscope.load()
    assert (tr.bundle.src_lang, tr.bundle.tgt_lang) == ("en", "de")
    result = tr.translate("Two dogs are running through the snow.")
    assert "Hunde" in result.text and "Schnee" in result.text, result.text
    assert result.attention.cross.shape[-1] == len(result.source_tokens)


SHIPPED = ["multi30k-en-de", "multi30k-en-fr"]


def test_exactly_the_expected_checkpoints_ship() -> None:
    assert sorted(p.stem for p in shipped_dir().glob("*.safetensors")) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_checkpoint_is_small_fp16_and_loads(name: str) -> None:
    path = shipped_dir() / f"{name}.safetensors"
    assert path.stat().st_size < 25 * 1024 * 1024
    tensors, _ = tensors_and_meta(path)
    not_half = sorted(k for k, t in tensors.items() if t.is_floating_point() and t.dtype != torch.float16)
    assert not not_half, f"stored in another dtype than float16: {not_half}"
    assert any(t.is_floating_point() for t in tensors.values())
    tr = attnscope.load(path, "cpu")
    assert {p.dtype for p in tr.model.parameters()} == {torch.float32}  # computed in fp32 after loading
    assert tr.translate_batch(["A man is riding a bike."])[0]


def test_the_french_model_uses_learned_positions() -> None:
    tr = attnscope.load(shipped_dir() / "multi30k-en-fr.safetensors")
    assert tr.model.config.positional == "learned"
    assert "chiens" in tr.translate("Two dogs are running through the snow.").text


def test_load_refuses_what_is_not_a_checkpoint(tmp_path) -> None:
    bad = tmp_path / "x.safetensors"
    bad.write_bytes(b"nope")
    with pytest.raises(attnscope.CheckpointError):
        attnscope.load(bad)
