"""What one Hugging Face architecture supplies to the import: the config.json sizes it needs, the ModelConfig fields
it reads, its weights under attnscope's names and its tokenizer's rule (hf_families/__init__.py lists them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import Tensor

from attnscope.checkpoints.importers.assemble import Weights
from attnscope.checkpoints.importers.hf_files import HFFolder
from attnscope.checkpoints.importers.hf_tokens import Tokens

Config = dict[str, Any]  # config.json as read


@dataclass(frozen=True)
class Architecture:
    """One architecture of transformers (one or more model_types) as attnscope imports it."""

    name: str  # as the report and the refusals name it, e.g. "mBART"
    sizes: dict[str, int]  # config.json's required sizes -> the largest accepted (hf_config.check_config)
    optional: dict[str, int]  # sizes config.json may leave out
    settings: tuple[str, ...]  # the ModelConfig fields the import report lists as config.json's
    fields: Callable[[Config], Config]  # config.json (its sizes checked) -> ModelConfig fields
    weights: Callable[[dict[str, Tensor], Config, Config], Weights]  # (state, those fields, config.json) -> tensors
    tokens: Callable[[HFFolder, Any, str | None, str | None], Tokens]  # (folder, tokenizer, src_lang, tgt_lang)
    languages: bool = False  # the tokenizer takes the language codes (src_lang/tgt_lang) of a multilingual model
