"""config.json's numbers checked before anything is allocated or looked up from them.

A Hugging Face config is a file from anyone: every size the import reads must be there, be a whole number
and lie in a range a real model has, and every token id must lie inside the vocabulary; otherwise the import
stops with one sentence naming the field (not a KeyError, nor a 10^10-element vocabulary built for minutes).
Which sizes, and their limits, each architecture says (hf_families/).
"""
from __future__ import annotations

from typing import Any

from attnscope.checkpoints.checkpoint import CheckpointError

MAX_VOCAB = 2**22  # 4,194,304 tokens (NLLB-200 has 256,206)
TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "forced_bos_token_id",
             "forced_eos_token_id")


def check_config(config: dict[str, Any], where: str, sizes: dict[str, int], optional: dict[str, int]) -> None:
    """Refuse a config.json (of the folder or zip `where`) whose sizes or token ids the import cannot use: its
    architecture's `sizes` (field -> largest value) must be there, its `optional` ones may be absent."""
    for name, limit in sizes.items():
        if name not in config:
            raise CheckpointError(f"config.json of {where} has no {name}: it is not a complete Hugging Face model config "
                                  "(save the model with save_pretrained)")
        _size(config, name, limit, where)
    for name, limit in optional.items():
        if config.get(name) is not None:
            _size(config, name, limit, where)
    vocab = int(config["vocab_size"])
    for name in TOKEN_IDS:
        value = config.get(name)
        if value is not None and (not _whole(value) or not 0 <= value < vocab):
            raise CheckpointError(f"config.json of {where} has {name} {value!r}, not a token id below its vocab_size "
                                  f"{vocab:,}")


def _whole(value: Any) -> bool:
    """A number without a fraction (JSON may write 512 as 512.0 or 5.12e2); booleans are not numbers here."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()


def _size(config: dict[str, Any], name: str, limit: int, where: str) -> None:
    """Refuse a size that is no whole number or lies outside 1..limit."""
    value = config[name]
    if not _whole(value):
        raise CheckpointError(f"config.json of {where} has {name} {value!r}: it must be a whole number")
    if not 1 <= value <= limit:
        raise CheckpointError(f"config.json of {where} has {name} {value:,.0f}, outside what attnscope imports "
                              f"(1 to {limit:,})")
