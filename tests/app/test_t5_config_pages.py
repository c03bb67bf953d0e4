"""Every page on a model of T5's variants (relative position bias, RMS norm, gated feed-forward, unscaled scores, no
biases), as `python -m attnscope train --set positional=relative ...` can make: each shows it as the model computes it
(the bias by offset and its buckets, the bias added to unscaled q·k, RMS norms, every attribution measure)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import Bundle
from attnscope.model.config import ModelConfig
from attnscope.model.tokenization import TextCodec, train_word_level
from attnscope.model.transformer import Transformer
from tests.app.conftest import app_on
from tests.app.test_attribution_page import figures, values
from tests.support import explorers, page_script, page_scripts

PAGES = page_scripts(leave_out=("Head atlas", "Train", "Checkpoints"))


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


@pytest.mark.parametrize("page", PAGES)
def test_every_page_shows_this_model(t5_dir: Path, page: str, monkeypatch: pytest.MonkeyPatch) -> None:
    app = opened(t5_dir, page, monkeypatch)
    assert not [i.value for i in app.info if "does not cover" in i.value]


def test_the_positional_page_draws_each_stacks_bias_and_buckets(t5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = opened(t5_dir, page_script("Positional encoding"), monkeypatch)
    text = " ".join(m.value for m in app.markdown)
    assert "adds nothing to its token embeddings" in text and "vector per position" not in text
    assert "not draw" not in text and "Encoder self-attention (bidirectional" in text and "Decoder masked" in text
    assert "from ±6 on in the encoder and from −12 on in the decoder, every offset shares" in text  # not from 16
    assert len(app.get("plotly_chart")) == 4 + 4  # the paper's sinusoids, then a heatmap and lines per stack
    encoder, decoder = (t.value for t in app.dataframe[-2:])  # each stack's buckets, as relative_bucket assigns them
    assert list(encoder.iloc[:, 0]) == [0, 1, 2, 3, 5, 6, 7]  # bucket 4, a later key at distance 0, never occurs
    assert list(encoder.iloc[:, 2]) == ["exact", "exact", "logarithmic", "logarithmic", "exact", "logarithmic", "logarithmic"]
    assert list(decoder.iloc[:, 0]) == list(range(8)) and list(decoder.iloc[:, 1])[-1] == "≤ −12"  # 4 + log(12/4)/log(16/4)·4: 7


def test_the_anatomy_page_shows_rms_norms_and_the_gated_feed_forward(t5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = opened(t5_dir, page_script("Model anatomy"), monkeypatch)
    parts = {row["part"].split(",")[0]: row for row in app.table[-1].value.to_dict("records")}
    assert parts["norm"]["computes"].startswith("RMSNorm") and parts["norm"]["learns"] == "g [D]"
    assert parts["feed-forward"]["computes"].startswith("gated") and "no biases" in parts["feed-forward"]["learns"]
    shown = " ".join(str(v) for t in [app.table[-1], *app.dataframe] for v in t.value.to_numpy().ravel())
    assert "LayerNorm" not in shown  # the config's table names it only among the options of layer_norm
    assert "Q·Kᵀ (not scaled) + position bias B" in shown
    assert "d_head = 8 = D / H" in " ".join(m.value for m in app.markdown)


def test_inside_one_head_ships_the_bias_added_to_unscaled_scores(t5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each kind of attention as T5 computes it, for the browser to draw: q·k without 1/√d_k, plus the position bias
    in self-attention (scores = q·k + bias where not masked), the rows equal to the recorded ones; RMSNorm and no
    b^O in the block."""
    app = opened(t5_dir, page_script("Inside one head"), monkeypatch)
    assert not app.exception, [e.value for e in app.exception]
    (sent,) = explorers(app)
    assert sent.header["norm_kind"] == "RMSNorm" and sent.header["relative"]
    for kind in ("encoder", "decoder", "cross"):
        assert sent.header["kinds"][kind]["scale"] == 1.0
        name = f"{kind}.0"
        assert (f"{name}.bias" in sent.arrays) == (kind != "cross") and f"{name}.b_o" not in sent.arrays
        q, k, scores = sent.arrays[f"{name}.q"], sent.arrays[f"{name}.k"], sent.arrays[f"{name}.scores"]
        terms = np.einsum("hqd,hkd->hqk", q, k) + sent.arrays.get(f"{name}.bias", 0)
        live = np.isfinite(scores)
        assert np.abs(terms[live] - scores[live]).max() <= 1e-4
        assert sent.arrays[f"{name}.gap"].max() <= 1e-6


def test_inside_one_heads_positions_tab_draws_the_bias(t5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = opened(t5_dir, page_script("Inside one head"), monkeypatch)
    app.session_state["inside_tab"] = "6 · Positional encodings (section 3.5)"
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert any("a bias on the scores, by offset" in h.value for h in app.subheader)
    assert len(app.get("plotly_chart")) == 4  # a heatmap and lines per stack


def test_the_attribution_page_shows_every_measure(t5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every measure (proved on T5's variants in tests/engine/attribution), the split of each token summing to one."""
    app = opened(t5_dir, page_script("Attribution"), monkeypatch)
    split = next(spec for title, spec in figures(app).items() if title.startswith("Where each generated token came from"))
    source, prefix = (values(trace["y"]) for trace in split["data"][:2])
    np.testing.assert_allclose(source + prefix, 1.0, atol=1e-9)
    app.session_state["attr_tab"] = "Source tokens by method"
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    methods = next(spec for title, spec in figures(app).items() if "source tokens by method" in title)
    assert methods["layout"]["yaxis"]["ticktext"] == ["attention", "norm-based", "ALTI+", "value zeroing",
                                                      "gradient × input", "integrated gradients"]


def test_the_step_pages_attribution_shows_this_model(t5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = opened(t5_dir, page_script("Step through decoding"), monkeypatch)
    app.toggle(key="step_attr").set_value(True).run()
    assert not app.exception, [e.value for e in app.exception]
    assert not any("does not cover" in i.value for i in app.info)
    assert any("Integrated gradients appear here once computed" in c.value for c in app.caption)
