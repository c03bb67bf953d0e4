"""Whether a model fits is decided from the machine's available memory before anything is allocated, and refused in
one sentence that says what to do."""
from __future__ import annotations

from pathlib import Path

import pytest

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import Bundle, CheckpointError
from attnscope.model import budget
from attnscope.model.config import ModelConfig
from attnscope.model.tokenization import TextCodec, train_word_level
from attnscope.model.transformer import Transformer

CONFIG = ModelConfig(src_vocab_size=11, tgt_vocab_size=11, d_model=16, n_heads=4, d_ff=32, n_encoder_layers=1,
                     n_decoder_layers=1, max_len=20, share_embeddings=True)


def test_the_decision_follows_the_available_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "available_bytes", lambda: 10 * 2**30)
    assert budget.model_refusal(1_370_000_000, "nllb") is None  # 6.4 GB of float32 weights and room
    assert budget.model_refusal(1_370_000_000, "nllb", itemsize=8) == (
        "nllb has 1,370,000,000 weights, which need about 12.8 GB of memory as float64, more than the 10.0 GB this "
        "machine has available now: close other programs or models, or use a machine with more memory (README, 'Big "
        "models', lists the sizes that fit)")
    assert ModelConfig(src_vocab_size=256_206, tgt_vocab_size=256_206, d_model=2048, n_heads=16, d_ff=8192,
                       n_encoder_layers=24, n_decoder_layers=24)  # no fixed limit on a config (3.3B parameters)


def test_loading_refuses_from_the_header_before_a_weight_is_read(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    codec = TextCodec(train_word_level(["a b c d e f g"]))
    path = checkpoint.save(Transformer(CONFIG), Bundle(CONFIG, codec, codec, "en", "de"), tmp_path / "m.safetensors")

    def unread(*_: object, **__: object) -> None:
        raise AssertionError("a weight was read for a model that should have been refused")

    monkeypatch.setattr(checkpoint, "read_tensors", unread)
    monkeypatch.setattr(budget, "available_bytes", lambda: 2**10)
    with pytest.raises(CheckpointError, match=r"^m.safetensors has [\d,]+ weights, which need about 0.0 GB of "
                       r"memory as float32, more than the 0.0 GB this machine has available now: close other programs"):
        checkpoint.load(path)


def test_a_model_to_train_that_does_not_fit_is_refused_before_it_is_built(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from attnscope.model.config import ConfigError
    from attnscope.training.config import TrainConfig
    from attnscope.training.loop import Trainer

    def unbuilt(*_: object, **__: object) -> None:
        raise AssertionError("a model was built that should have been refused")

    monkeypatch.setattr(budget, "available_bytes", lambda: 2**10)
    monkeypatch.setattr(Transformer, "__init__", unbuilt)
    with pytest.raises(ConfigError, match=r"^the model to train has [\d,]+ weights, which need about 0.0 GB"):
        Trainer(TrainConfig(out_dir=str(tmp_path), epochs=1, task="reverse", preset="toy", toy_size=50,
                            threads=1)).setup()
