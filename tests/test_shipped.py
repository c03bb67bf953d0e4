"""The checkpoints we ship load and translate sensibly (no download, no data needed)."""
from __future__ import annotations

import pytest

import attnscope
from attnscope.checkpoints.registry import shipped_dir


def test_the_default_checkpoint_translates_a_known_sentence() -> None:
    tr = attnscope.load()
    assert (tr.bundle.src_lang, tr.bundle.tgt_lang) == ("en", "de")
    result = tr.translate("Two dogs are running through the snow.")
    assert "Hunde" in result.text and "Schnee" in result.text, result.text
    assert result.attention.cross.shape[-1] == len(result.source_tokens)


@pytest.mark.parametrize("name", ["multi30k-en-de", "multi30k-en-fr"])
def test_every_shipped_checkpoint_is_small_fp16_and_loads(name: str) -> None:
    path = shipped_dir() / f"{name}.safetensors"
    assert path.stat().st_size < 25 * 1024 * 1024
    tr = attnscope.load(path)
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
