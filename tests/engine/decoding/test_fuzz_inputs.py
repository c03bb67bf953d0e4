"""Anything a user can type goes through the public API without an exception (1,000+ inputs)."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnscope.checkpoints.checkpoint import Bundle
from attnscope.engine.decoding.translator import MAX_CHARS, InputError, Translator
from attnscope.model.config import ModelConfig
from attnscope.model.tokenization import TextCodec, train_bpe
from attnscope.model.transformer import Transformer

CORPUS = ["A man rides a bike.", "Two dogs run in the snow!", "Ein Mann fährt Fahrrad.", "Zwei Hunde laufen im Schnee."] * 5

NASTY = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=st.characters(categories=("Cc", "Cf", "Mn", "Zs", "So", "Lo")), max_size=100),
    st.sampled_from(["", " ", "\t\n", "\x00", "😀" * 50, "مرحبا بالعالم", "שלום", "e\u0301\u0301\u0301",
                     "<script>alert(1)</script>", "!!!...???", "a" * 10_000, "‮evil", "\ud7ff"]),
)


@pytest.fixture(scope="module")
def translator() -> Translator:
    codec = TextCodec(train_bpe(CORPUS, 60))
    config = ModelConfig(src_vocab_size=codec.vocab_size, tgt_vocab_size=codec.vocab_size, d_model=16, n_heads=2,
                         d_ff=16, n_encoder_layers=1, n_decoder_layers=1, max_len=24, share_embeddings=True,
                         dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    return Translator(Transformer(config).eval(), Bundle(config, codec, codec, "en", "de"))


@settings(max_examples=1000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=NASTY)
def test_translate_never_raises_anything_but_a_clear_input_error(translator: Translator, text: str) -> None:
    try:
        result = translator.translate(text, max_len=8)
    except InputError as err:
        assert not text.strip() and "empty" in str(err)
        return
    assert result.attention is not None
    assert len(result.source_tokens) <= translator.model.config.max_len
    if len(text) > MAX_CHARS:
        assert any("cut" in n for n in result.notes)


def test_long_input_is_truncated_with_a_note(translator: Translator) -> None:
    result = translator.translate("A man rides a bike. " * 50, max_len=5)
    assert len(result.source_ids) == translator.model.config.max_len
    assert any("reads at most" in n for n in result.notes)


def test_translate_batch_survives_nasty_inputs(translator: Translator) -> None:
    texts = ["", "\x00", "😀", "a" * 10_000, "A man rides a bike."]
    out = translator.translate_batch(texts, max_len=6)
    assert len(out) == len(texts) and out[0] == "" and out[4] == translator.translate(texts[4], max_len=6).text
