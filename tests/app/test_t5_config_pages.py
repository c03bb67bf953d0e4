"""Every page on a model of T5's variants (relative position bias, RMS norm, gated feed-forward, unscaled scores, no
biases), as `python -m attnscope train --set positional=relative ...` can make: the pages that show it work, and the
two whose arithmetic does not cover T5 yet (Inside one head, Attribution, and the Step page's attribution) say so in
one sentence instead of failing."""
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

SHOWN = ("pages/translate.py", "pages/step.py", "pages/heads.py", "pages/positional.py", "pages/anatomy.py")
NOT_YET = ("pages/inside.py", "pages/attribution.py")


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    codec = TextCodec(train_word_level(["A man rides a red bike . ein Mann fährt ein rotes Rad"]))
    config = ModelConfig(src_vocab_size=codec.vocab_size, tgt_vocab_size=codec.vocab_size, d_model=16, n_heads=2, d_ff=32,
                         n_encoder_layers=2, n_decoder_layers=2, max_len=32, positional="relative", relative_buckets=8,
                         relative_max_distance=16, layer_norm="rms", norm="pre", ffn="gated", activation="gelu_tanh",
                         qkv_bias=False, out_bias=False, ffn_bias=False, scale_scores=False, share_embeddings=True)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("checkpoints")
    checkpoint.save(Transformer(config).eval(), Bundle(config, codec, codec, "en", "de", {"name": "t5-like"}),
                    out / "t5-like.safetensors")
    return out


def opened(folder: Path, page: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    app = app_on(folder, monkeypatch, "A man rides a red bike .", max_len=8)
    app.switch_page(page).run()
    assert not app.exception, [e.value for e in app.exception]
    return app


@pytest.mark.parametrize("page", SHOWN + NOT_YET)
def test_every_page_runs_and_says_what_it_does_not_cover(t5_dir: Path, page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app = opened(t5_dir, page, monkeypatch)
    notes = [i.value for i in app.info if "does not cover this model yet" in i.value]
    assert bool(notes) == (page in NOT_YET), notes
    if notes:
        assert "relative position bias, RMS norm, gated feed-forward, unscaled scores" in notes[0]


def test_the_positional_page_draws_each_stacks_bias_and_buckets(t5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = opened(t5_dir, "pages/positional.py", monkeypatch)
    text = " ".join(m.value for m in app.markdown)
    assert "adds nothing to its token embeddings" in text and "vector per position" not in text
    assert "not draw" not in text and "Encoder self-attention (bidirectional" in text and "Decoder masked" in text
    assert len(app.get("plotly_chart")) == 4 + 4  # the paper's sinusoids, then a heatmap and lines per stack
    encoder, decoder = (t.value for t in app.dataframe[-2:])  # each stack's buckets, as relative_bucket assigns them
    assert list(encoder.iloc[:, 0]) == [0, 1, 2, 3, 5, 6, 7]  # bucket 4, a later key at distance 0, never occurs
    assert list(encoder.iloc[:, 2]) == ["exact", "exact", "logarithmic", "logarithmic", "exact", "logarithmic", "logarithmic"]
    assert list(decoder.iloc[:, 0]) == list(range(8)) and list(decoder.iloc[:, 1])[-1] == "≤ −12"  # 4 + log(12/4)/log(16/4)·4: 7


def test_the_step_pages_attribution_says_so_too(t5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = opened(t5_dir, "pages/step.py", monkeypatch)
    app.toggle(key="step_attr").set_value(True).run()
    assert not app.exception, [e.value for e in app.exception]
    assert any("Attribution does not cover this model yet" in i.value for i in app.info)
