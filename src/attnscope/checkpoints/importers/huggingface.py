"""A Hugging Face translation model (MarianMT, BART, mBART, M2M100/NLLB, T5/mT5/ByT5) as an attnscope model that computes
what transformers computes: the same logits, attention weights and tokens (tests/checkpoints/test_huggingface.py).

The folder's config.json names its architecture (`model_type`), picked here once from hf_families/, whose module says
what config.json, the weights and the tokenizer fix (the tokenizer and generation settings fix the vocabularies and
token-level behaviour); nothing is guessed, so nothing needs checking against the user's outputs. Other model types
are refused with the route that works for them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.decoding_rules import DecodingRules, hf_generation
from attnscope.checkpoints.importers.assemble import Family, Vocabularies, Weights, assemble
from attnscope.checkpoints.importers.hf_config import check_config
from attnscope.checkpoints.importers.hf_families import ARCHITECTURES, refusal
from attnscope.checkpoints.importers.hf_families.architecture import Architecture
from attnscope.checkpoints.importers.hf_files import HFFolder, located, open_folder
from attnscope.checkpoints.importers.hf_tokens import Tokens, finished, load_tokenizer, size_note
from attnscope.checkpoints.importers.parts import Imported
from attnscope.model.config import ModelConfig


def import_hf(source: str | os.PathLike[str], *, src_lang: str | None = None, tgt_lang: str | None = None,
              name: str | None = None, cache_dir: str | os.PathLike[str] | None = None) -> Imported:
    """Import a Hugging Face folder, a zip of one, or a hub name (local cache first; see hf_files.located)."""
    with located(source, cache_dir=cache_dir) as path:
        folder = open_folder(path)
        label = name or (folder.path.name if Path(source).exists() else str(source).rsplit("/", 1)[-1])  # a hub name's
        where = Path(source).name if Path(source).exists() else str(source)
        return _imported(folder, where, label, src_lang, tgt_lang)


def _imported(folder: HFFolder, where: str, label: str, src_lang: str | None, tgt_lang: str | None) -> Imported:
    """The model of an opened folder (`where`: the user's folder, zip or hub name, for errors); everything is read
    before the folder (maybe a temporary one) goes."""
    arch = ARCHITECTURES.get(folder.model_type)
    if arch is None:
        raise CheckpointError(refusal(folder.model_type, folder.config.get("architectures")))
    check_config(folder.config, where, arch.sizes, arch.optional)
    fields = arch.fields(folder.config)  # before transformers reads the config with the tokenizer: a bad field gets
    #   our sentence, not its traceback
    tok = load_tokenizer(folder, src_lang, tgt_lang, languages=arch.languages)
    return assemble(HuggingFace(folder, arch, tok, finished(tok, arch.tokens(folder, tok, src_lang, tgt_lang)), label,
                                fields))


@dataclass(frozen=True)
class HuggingFace(Family):
    """A Hugging Face folder's family: config.json, its weights, and the tokens its tokenizer fixes."""

    folder: HFFolder
    arch: Architecture  # its model_type's (hf_families.ARCHITECTURES)
    tok: Any
    found: Tokens
    name: str
    fields: dict[str, Any]  # ModelConfig fields read from config.json (its architecture's `fields`)

    @property
    def label(self) -> str:
        return f"Hugging Face {self.arch.name} ({type(self.tok).__name__})"

    @property
    def data(self) -> str:
        return f"imported {self.label} from {self.folder.path.name}"

    def config_fields(self) -> dict[str, Any]:
        return dict(self.fields)

    def vocabularies(self) -> Vocabularies:
        f = self.found
        return Vocabularies(f.src, f.tgt, f.src_codec, f.tgt_codec, f.langs, f.fields, task_prefix=f.task_prefix)

    def weights(self, fields: dict[str, Any]) -> Weights:
        return self.arch.weights(self.folder.weights(), fields, self.folder.config)

    def settings(self, config: ModelConfig) -> dict[str, tuple[Any, str]]:
        return {k: (getattr(config, k), "config.json") for k in self.arch.settings}

    def notes(self) -> tuple[str, ...]:
        note = size_note(self.tok, self.found)
        prefix = self.found.task_prefix
        said = (f"Task prefix: {prefix!r} (config.json's task_specific_params) goes before every sentence "
                "(change it with translate --task-prefix, or under the app's sentence box)." if prefix else None)
        return tuple(n for n in (note, said) if n)

    def rules(self) -> DecodingRules:
        return hf_generation(self.folder.setting, self.tok.eos_token_id)  # generate()'s, from generation_config.json

