"""A T5-style checkpoint trained with a task prefix: the sentence box shows the prefix the app adds, the source the model
reads starts with it, and the user can change or clear it (each checkpoint keeps its own)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import Bundle
from attnscope.model.config import ModelConfig
from attnscope.model.tokenization import TextCodec, train_word_level
from attnscope.model.transformer import Transformer
from tests.app.conftest import app_on
from tests.support import explorers, page_script

PREFIX = "translate English to German : "
BOX = "Task prefix, added before the sentence"


@pytest.fixture(scope="module")
def prefixed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    codec = TextCodec(train_word_level(["translate English to German summarize : A man rides a red bike . ein Mann fährt"]))
    config = ModelConfig(src_vocab_size=codec.vocab_size, tgt_vocab_size=codec.vocab_size, d_model=16, n_heads=2, d_ff=32,
                         n_encoder_layers=1, n_decoder_layers=1, max_len=32, positional="relative", relative_buckets=8,
                         relative_max_distance=16, layer_norm="rms", norm="pre", share_embeddings=True)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("checkpoints")
    bundle = Bundle(config, codec, codec, "en", "de", {"name": "prefixed"}, task_prefix=PREFIX)
    checkpoint.save(Transformer(config).eval(), bundle, out / "prefixed.safetensors")
    return out


def shown_prefix(app: AppTest) -> list[str]:
    """What the task-prefix box holds ([] when the page shows none)."""
    return [c.value for c in app.text_input if c.label == BOX]


def axis_labels(app: AppTest) -> set[str]:
    """The tokens the page's attention explorers label their axes with: the source tokens the model read among them."""
    return {token for sent in explorers(app) for token in (*sent.header["source"], *sent.header["target"])}


def test_the_prefix_is_shown_read_and_changeable(prefixed_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attnscope.ui import models

    app = app_on(prefixed_dir, monkeypatch, "A man rides a red bike .", max_len=4)
    app.switch_page(page_script("Translate")).run()
    assert not app.exception, [e.value for e in app.exception]
    assert shown_prefix(app) == [PREFIX]
    assert {"translate", "English", "German", "man"} <= axis_labels(app)

    next(c for c in app.text_input if c.label == BOX).set_value("summarize : ").run()
    assert not app.exception, [e.value for e in app.exception]
    assert shown_prefix(app) == ["summarize : "]
    assert "summarize" in axis_labels(app) and not {"translate", "English"} & axis_labels(app)
    app.switch_page(page_script("Step through decoding")).run()  # kept across pages
    assert shown_prefix(app) == ["summarize : "]
    tr = models.translator("prefixed")
    assert tr.translate("A man", max_len=2).source_tokens[:5] == ("translate", "English", "to", "German", ":")


def test_models_without_a_prefix_show_no_box(toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_on(toy_checkpoint_dir, monkeypatch, "1 2 3")
    app.switch_page(page_script("Translate")).run()
    assert not app.exception and shown_prefix(app) == []
