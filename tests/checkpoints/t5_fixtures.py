"""Tiny Hugging Face T5-family models (T5 v1.0, v1.1 / Flan-T5, mT5, ByT5), saved as a user's folder would be.

Nothing is downloaded: a SentencePiece model (T5's ids: <pad> 0, </s> 1, <unk> 2, no <s>) is trained here
(deterministically) and T5Tokenizer reads it with a few <extra_id_N> sentinels; the output layer has rows beyond the
tokenizer (as T5's 32,128 rows for 32,100 tokens). A random tiny T5 says <pad> or one token over and over, so each
model's weights are trained ones, shipped in tests/fixtures/t5 (fp32, made by its regenerate.py): training here would
make the outputs depend on the float arithmetic (an AMD EPYC's ByT5 ended 1 output in 20 with </s>; the test needs 3).
The config.json is written as the hub's are (Flan-T5 and mT5 say tie_word_embeddings false, t5-small says nothing
about it), not as transformers 5 rewrites it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors.torch import load_model
from torch import nn

from tests.checkpoints.hf_fixtures import DE, EN, train_spm, transformers

WEIGHTS = Path(__file__).resolve().parents[1] / "fixtures" / "t5"
SIZES = dict(d_model=32, num_heads=4, d_ff=48, num_layers=2, num_decoder_layers=3, relative_attention_num_buckets=8,
             relative_attention_max_distance=12, dropout_rate=0.0)
EXTRA_IDS, SPARE_ROWS = 6, 3
PREFIXES = {"summarization": {"prefix": "summarize: "},
            "translation_en_to_de": {"prefix": "translate English to German: "},
            "translation_en_to_fr": {"prefix": "translate English to French: "}}
TRAIN_PREFIX = PREFIXES["translation_en_to_de"]["prefix"]
Built = tuple[nn.Module, Any, dict[str, Any]]  # the model at its seeded initialisation, its tokenizer, config.json's fields


def tokenizer(folder: Path) -> Any:
    """T5Tokenizer (tokenizers-backed in transformers 5) of a SentencePiece model trained on both languages."""
    train_spm(EN + DE, folder / "spiece.model", 120, "unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    return transformers.T5Tokenizer.from_pretrained(str(folder), extra_ids=EXTRA_IDS)


def _model(cls: type, config: Any, seed: int, untie: bool) -> nn.Module:
    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    model = cls(config)
    if untie:  # transformers ties lm_head whatever the config says; a v1.1 checkpoint holds its own
        model.lm_head.weight = nn.Parameter(torch.randn(config.vocab_size, config.d_model) * config.d_model ** -0.5)
    return model


def build_v1_0(folder: Path) -> Built:
    """t5-small's layout: ReLU, heads adding up to d_model, output = embedding rescaled, task prefixes in config.json."""
    tok = tokenizer(folder)
    config = transformers.T5Config(vocab_size=len(tok) + SPARE_ROWS, d_kv=8, feed_forward_proj="relu",
                                   decoder_start_token_id=0, **SIZES)
    return _model(transformers.T5ForConditionalGeneration, config, 0, False), tok, {"task_specific_params": PREFIXES}


def build_v1_1(folder: Path) -> Built:
    """Flan-T5's layout: gated GELU, untied output layer, 4 heads of 6 in 32 (d_kv * heads != d_model)."""
    tok = tokenizer(folder)
    config = transformers.T5Config(vocab_size=len(tok) + SPARE_ROWS, d_kv=6, feed_forward_proj="gated-gelu",
                                   decoder_start_token_id=0, tie_word_embeddings=False, **SIZES)
    return _model(transformers.T5ForConditionalGeneration, config, 1, True), tok, {"tie_word_embeddings": False}


def build_mt5(folder: Path) -> Built:
    """mT5: model_type mt5 (never rescaled), gated GELU, untied."""
    tok = tokenizer(folder)
    config = transformers.MT5Config(vocab_size=len(tok) + SPARE_ROWS, d_kv=8, feed_forward_proj="gated-gelu", **SIZES)
    return _model(transformers.MT5ForConditionalGeneration, config, 2, True), tok, {"tie_word_embeddings": False}


def build_byt5(folder: Path) -> Built:
    """ByT5: model_type t5 with ByT5Tokenizer (UTF-8 bytes after <pad> </s> <unk>, then sentinels), gated GELU; a row
    for every token and no more (as ByT5's 384; ByT5Tokenizer.decode fails on an id past its tokens)."""
    tok = transformers.ByT5Tokenizer(extra_ids=EXTRA_IDS)
    config = transformers.T5Config(vocab_size=len(tok), d_kv=8, feed_forward_proj="gated-gelu",
                                   decoder_start_token_id=0, tie_word_embeddings=False, **SIZES)
    return _model(transformers.T5ForConditionalGeneration, config, 3, True), tok, {"tie_word_embeddings": False}


BUILDERS: dict[str, Callable[[Path], Built]] = {"v1.0": build_v1_0, "v1.1": build_v1_1, "mt5": build_mt5,
                                                "byt5": build_byt5}


def saved(name: str, folder: Path, trained: bool = True) -> Path:
    """The variant saved into `folder` with the shipped trained weights (`trained` False: its random initialisation,
    for tests of what the import reads, which does not depend on the weights)."""
    model, tok, config_json = BUILDERS[name](folder)
    if trained:
        load_model(model, WEIGHTS / f"{name}.safetensors")  # strict: a different tokenizer's vocabulary size fails here
    return _save(folder, model.eval(), tok, config_json)


def _save(folder: Path, model: nn.Module, tok: Any, config_json: dict[str, Any]) -> Path:
    """save_pretrained, then config.json's tying fields as the hub's files have them."""
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.pop("scale_decoder_outputs", None)
    config.pop("tie_word_embeddings", None)
    path.write_text(json.dumps(config | config_json, indent=2))
    return folder


def t5_v1_0(folder: Path, trained: bool = True) -> Path:
    """t5-small's layout, saved (the Checkpoints journey imports it)."""
    return saved("v1.0", folder, trained)


VARIANTS: dict[str, Callable[[Path], Path]] = {name: lambda folder, name=name: saved(name, folder) for name in BUILDERS}
# Greedy length limit of the tests: ByT5 spells bytes, so a sentence that ends with </s> takes about 3 times T5's tokens.
MAX_NEW_TOKENS: dict[str, int] = {"v1.0": 20, "v1.1": 20, "mt5": 20, "byt5": 64}
LANGS: dict[str, tuple[str | None, str | None]] = {"v1.0": ("en", "de"), "v1.1": (None, None), "mt5": (None, None),
                                                   "byt5": (None, None)}
