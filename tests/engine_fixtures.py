"""Tiny models, tokenizers and translators for the inspection-engine tests.

Import explicitly (`from tests.engine_fixtures import ...`); nothing here is collected as tests.
Every model is random (seeded), in eval mode, without dropout, and small enough that a
forward pass takes milliseconds.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnscope.checkpoints.checkpoint import Bundle, save
from attnscope.engine.decoding.translator import Translator
from attnscope.engine.recording.capture import Recording
from attnscope.model.config import EOS_ID, ModelConfig
from attnscope.model.hooks import sites
from attnscope.model.tokenization import TextCodec, train_word_level
from attnscope.model.transformer import Transformer

SEEDS = (0, 1, 2)
# T5's variants (tests/model/test_t5.py checks them against transformers): relative positions, RMS norm, gated GELU,
# no biases, unscaled scores, a rescaled output layer input, narrow heads, the decoder starting on <pad>
T5 = dict(positional="relative", relative_buckets=8, relative_max_distance=5, layer_norm="rms", norm="pre", ffn="gated",
          activation="gelu_tanh", qkv_bias=False, out_bias=False, ffn_bias=False, scale_scores=False, scale_output=True,
          embed_scale=False, decoder_start=0, d_head=6)
SYMBOLS = "a b c d e f g h i j k l"  # word-level vocabulary: 4 specials + 12 symbols
MAX_LEN = 32


def codec() -> TextCodec:
    """A word-level tokenizer whose tokens are the letters a..l."""
    return TextCodec(train_word_level([SYMBOLS, "a b c", "l k j"]))


def tiny_config(vocab: int = 16, **overrides) -> ModelConfig:
    base = dict(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=16, n_heads=4, d_ff=32, n_encoder_layers=2,
                n_decoder_layers=3, dropout=0.0, attention_dropout=0.0, max_len=MAX_LEN)
    return ModelConfig(**(base | overrides))


def tiny_model(seed: int, eos_bias: float = 0.0, device: torch.device | str = "cpu", **overrides) -> Transformer:
    """A random tiny Transformer in eval mode on `device` (the same weights on every device);
    `eos_bias` makes <eos> likelier (hypotheses end early)."""
    torch.manual_seed(seed)
    model = Transformer(tiny_config(**overrides)).eval()
    if eos_bias:
        with torch.no_grad():
            model.generator.bias[EOS_ID] += eos_bias
    return model.to(device)


def random_source(seed: int, n: int = 6, vocab: int = 16) -> list[int]:
    """n random non-special ids followed by <eos>."""
    g = torch.Generator().manual_seed(1000 + seed)
    return torch.randint(4, vocab, (n,), generator=g).tolist() + [EOS_ID]


def tiny_bundle(**overrides) -> Bundle:
    c = codec()
    return Bundle(tiny_config(c.vocab_size, **overrides), c, c, "en", "de", {"name": "tiny"})


def tiny_translator(seed: int, eos_bias: float = 0.0, device: torch.device | str = "cpu", **overrides) -> Translator:
    bundle = tiny_bundle(**overrides)
    torch.manual_seed(seed)
    model = Transformer(bundle.config).eval()
    if eos_bias:
        with torch.no_grad():
            model.generator.bias[EOS_ID] += eos_bias
    return Translator(model.to(device), bundle, label=f"tiny-{seed}")


def no_hooks_left(module: torch.nn.Module) -> bool:
    """No recorder attached: no forward (pre-)hooks, nobody listening to a hook point."""
    return (all(not m._forward_hooks and not m._forward_pre_hooks for m in module.modules())
            and all(not hooks.listeners for _, hooks in sites(module)))


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny checkpoint (word-level a..l tokenizer, random weights, seed 0)."""
    translator = tiny_translator(0, eos_bias=2.0)
    return save(translator.model, translator.bundle, tmp_path_factory.mktemp("engine") / "tiny.safetensors")


def atol(device: torch.device) -> float:
    """Tolerance for two float32 computations of the same values (cached vs uncached, batch vs one):
    CPU kernels agree to ~1e-6; GPU kernels (other reduction orders, fused attention) to ~1e-5."""
    return 1e-5 if device.type == "cpu" else 1e-4


def joined(rec: Recording) -> dict[str, torch.Tensor]:
    """Each recorded module's joined weights by name (Recording.modules as a lookup, for comparisons)."""
    return {m.name: m.weights for m in rec.modules}
