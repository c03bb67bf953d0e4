"""Tiny Hugging Face T5-family models (T5 v1.0, v1.1 / Flan-T5, mT5, ByT5), saved as a user's folder would be.

Nothing is downloaded: a SentencePiece model (T5's ids: <pad> 0, </s> 1, <unk> 2, no <s>) is trained here and
T5Tokenizer reads it with a few <extra_id_N> sentinels; the output layer has rows beyond the tokenizer (as T5's
32,128 rows for 32,100 tokens). A random tiny T5 says <pad> or one token over and over, so each model is trained
for a few seconds on the fixture's sentence pairs: its outputs then depend on the input, vary and end with </s>.
The config.json is written as the hub's are (Flan-T5 and mT5 say tie_word_embeddings false, t5-small says nothing
about it), not as transformers 5 rewrites it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from tests.checkpoints.hf_fixtures import DE, EN, train_spm, transformers

SIZES = dict(d_model=32, num_heads=4, d_ff=48, num_layers=2, num_decoder_layers=3, relative_attention_num_buckets=8,
             relative_attention_max_distance=12, dropout_rate=0.0)
EXTRA_IDS, SPARE_ROWS = 6, 3
PREFIXES = {"summarization": {"prefix": "summarize: "},
            "translation_en_to_de": {"prefix": "translate English to German: "},
            "translation_en_to_fr": {"prefix": "translate English to French: "}}
TRAIN_PREFIX = PREFIXES["translation_en_to_de"]["prefix"]


def tokenizer(folder: Path) -> Any:
    """T5Tokenizer (tokenizers-backed in transformers 5) of a SentencePiece model trained on both languages."""
    train_spm(EN + DE, folder / "spiece.model", 120, "unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    return transformers.T5Tokenizer.from_pretrained(str(folder), extra_ids=EXTRA_IDS)


def trained(model: nn.Module, tok: Any, prefix: str = "", steps: int = 120, seed: int = 0) -> nn.Module:
    """The model after a few full-batch Adam steps on the fixture's EN -> DE pairs (seconds at these sizes)."""
    torch.manual_seed(seed)
    inputs = tok([prefix + e for e in EN], return_tensors="pt", padding=True)
    labels = tok(text_target=DE, return_tensors="pt", padding=True)["input_ids"]
    labels[labels == tok.pad_token_id] = -100
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        optimiser.zero_grad()
        model(**inputs, labels=labels).loss.backward()
        optimiser.step()
    return model.eval()


def _model(cls: type, config: Any, seed: int, untie: bool) -> nn.Module:
    torch.manual_seed(seed)
    config._attn_implementation = "eager"
    model = cls(config)
    if untie:  # transformers ties lm_head whatever the config says; a v1.1 checkpoint holds its own
        model.lm_head.weight = nn.Parameter(torch.randn(config.vocab_size, config.d_model) * config.d_model ** -0.5)
    return model


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


def t5_v1_0(folder: Path, steps: int = 120) -> Path:
    """t5-small's layout: ReLU, heads adding up to d_model, output = embedding rescaled, task prefixes in config.json
    (`steps` 0: untrained, for tests of what the import reads)."""
    tok = tokenizer(folder)
    config = transformers.T5Config(vocab_size=len(tok) + SPARE_ROWS, d_kv=8, feed_forward_proj="relu",
                                   decoder_start_token_id=0, **SIZES)
    model = trained(_model(transformers.T5ForConditionalGeneration, config, 0, False), tok, TRAIN_PREFIX, steps)
    return _save(folder, model, tok, {"task_specific_params": PREFIXES})


def t5_v1_1(folder: Path) -> Path:
    """Flan-T5's layout: gated GELU, untied output layer, 4 heads of 6 in 32 (d_kv * heads != d_model)."""
    tok = tokenizer(folder)
    config = transformers.T5Config(vocab_size=len(tok) + SPARE_ROWS, d_kv=6, feed_forward_proj="gated-gelu",
                                   decoder_start_token_id=0, tie_word_embeddings=False, **SIZES)
    model = trained(_model(transformers.T5ForConditionalGeneration, config, 1, True), tok)
    return _save(folder, model, tok, {"tie_word_embeddings": False})


def mt5(folder: Path) -> Path:
    """mT5: model_type mt5 (never rescaled), gated GELU, untied."""
    tok = tokenizer(folder)
    config = transformers.MT5Config(vocab_size=len(tok) + SPARE_ROWS, d_kv=8, feed_forward_proj="gated-gelu", **SIZES)
    model = trained(_model(transformers.MT5ForConditionalGeneration, config, 2, True), tok)
    return _save(folder, model, tok, {"tie_word_embeddings": False})


def byt5(folder: Path) -> Path:
    """ByT5: model_type t5 with ByT5Tokenizer (UTF-8 bytes after <pad> </s> <unk>, then sentinels), gated GELU; a row
    for every token and no more (as ByT5's 384; ByT5Tokenizer.decode fails on an id past its tokens)."""
    tok = transformers.ByT5Tokenizer(extra_ids=EXTRA_IDS)
    config = transformers.T5Config(vocab_size=len(tok), d_kv=8, feed_forward_proj="gated-gelu",
                                   decoder_start_token_id=0, tie_word_embeddings=False, **SIZES)
    model = trained(_model(transformers.T5ForConditionalGeneration, config, 3, True), tok, steps=150)
    return _save(folder, model, tok, {"tie_word_embeddings": False})


VARIANTS: dict[str, Callable[[Path], Path]] = {"v1.0": t5_v1_0, "v1.1": t5_v1_1, "mt5": mt5, "byt5": byt5}
LANGS: dict[str, tuple[str | None, str | None]] = {"v1.0": ("en", "de"), "v1.1": (None, None), "mt5": (None, None),
                                                   "byt5": (None, None)}
