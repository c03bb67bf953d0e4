"""A Hugging Face translation model (MarianMT, BART, mBART, M2M100/NLLB, T5/mT5/ByT5) as an attnscope model that computes
what transformers computes: the same logits, attention weights and tokens (tests/checkpoints/test_huggingface.py).

The folder's config.json fixes the architecture (hf_models.py; T5's in hf_t5.py), its tokenizer and generation settings fix
the vocabularies and token-level behaviour (hf_tokens.py); nothing is guessed, so nothing needs checking
against the user's outputs. Other model types are refused with the route that works for them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.decoding_rules import DecodingRules, hf_generation
from attnscope.checkpoints.importers import hf_t5
from attnscope.checkpoints.importers.assemble import Family, Vocabularies, Weights, assemble
from attnscope.checkpoints.importers.hf_config import T5_TYPES, check_config
from attnscope.checkpoints.importers.hf_files import HFFolder, located, open_folder
from attnscope.checkpoints.importers.hf_models import architecture, embeddings, layers
from attnscope.checkpoints.importers.hf_tokens import Tokens, load_tokenizer, size_note, tokens
from attnscope.checkpoints.importers.parts import Imported
from attnscope.model.config import ModelConfig

FAMILIES = {"marian": "MarianMT", "bart": "BART", "mbart": "mBART", "m2m_100": "M2M100/NLLB", "t5": "T5", "mt5": "mT5"}
FROM_GENERATE = ("record its attention with attnscope.from_generate(model.generate(..., output_attentions=True, "
                 "return_dict_in_generate=True), ...) instead")
REFUSED = {
    "umt5": "umT5's layers each learn their own relative-position bias, where attnscope's share the first layer's",
    "longt5": "LongT5's local attention and relative positions are not attnscope's attention",
    "fsmt": "FSMT (fairseq's WMT19 models in transformers) is not converted yet",
    "pegasus": "Pegasus is not converted yet",
    "led": "LED's windowed attention is not attnscope's attention",
}
SETTINGS = ("activation", "norm", "final_norm", "positional", "sinusoid", "position_offset", "embed_norm", "embed_scale",
            "source_framing", "source_prefix", "source_suffix", "decoder_start", "forced_first", "suppressed")
T5_SETTINGS = ("activation", "ffn", "layer_norm", "positional", "relative_buckets", "relative_max_distance", "d_head",
               "scale_output", "tie_embeddings", "source_framing", "decoder_start", "suppressed")


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
    kind = folder.model_type
    if kind not in FAMILIES:
        raise CheckpointError(refusal(kind, folder.config.get("architectures")))
    check_config(folder.config, where)
    fields = (hf_t5.architecture if kind in T5_TYPES else architecture)(folder.config)  # before transformers reads
    #   the config with the tokenizer: a bad field gets our sentence, not its traceback
    tok = load_tokenizer(folder, src_lang, tgt_lang)
    return assemble(HuggingFace(folder, tok, tokens(folder, tok, src_lang, tgt_lang), label, fields))


@dataclass(frozen=True)
class HuggingFace(Family):
    """A Hugging Face folder's family: config.json, its weights, and the tokens its tokenizer fixes."""

    folder: HFFolder
    tok: Any
    found: Tokens
    name: str
    fields: dict[str, Any]  # ModelConfig fields read from config.json (hf_models.architecture, hf_t5.architecture)

    @property
    def label(self) -> str:
        return f"Hugging Face {FAMILIES[self.folder.model_type]} ({type(self.tok).__name__})"

    @property
    def data(self) -> str:
        return f"imported {self.label} from {self.folder.path.name}"

    @property
    def t5(self) -> bool:
        return self.folder.model_type in T5_TYPES

    def config_fields(self) -> dict[str, Any]:
        return dict(self.fields)

    def vocabularies(self) -> Vocabularies:
        f = self.found
        return Vocabularies(f.src, f.tgt, f.src_codec, f.tgt_codec, f.langs, f.fields, task_prefix=f.task_prefix)

    def weights(self, fields: dict[str, Any]) -> Weights:
        state = self.folder.weights()
        if self.t5:
            return Weights(hf_t5.layers(state, fields), *hf_t5.embeddings(state))
        return Weights(layers(state, fields), *embeddings(state, self.folder.config))

    def settings(self, config: ModelConfig) -> dict[str, tuple[Any, str]]:
        return {k: (getattr(config, k), "config.json") for k in (T5_SETTINGS if self.t5 else SETTINGS)}

    def notes(self) -> tuple[str, ...]:
        note = size_note(self.tok, self.found)
        prefix = self.found.task_prefix
        said = (f"Task prefix: {prefix!r} (config.json's task_specific_params) goes before every sentence "
                "(change it with translate --task-prefix, or under the app's sentence box)." if prefix else None)
        return tuple(n for n in (note, said) if n)

    def rules(self) -> DecodingRules:
        return hf_generation(self.folder.setting, self.tok.eos_token_id)  # generate()'s, from generation_config.json


def refusal(kind: str, architectures: Any) -> str:
    """One sentence for a model type attnscope does not import, naming the route that works."""
    known = ", ".join(FAMILIES.values())
    what = REFUSED.get(kind)
    if what is None:
        arch = architectures[0] if isinstance(architectures, list) and architectures else kind or "an unknown model type"
        what = f"{arch} (model_type {kind!r}) is not one of the families attnscope converts ({known})"
    return f"{what}: {FROM_GENERATE}"

