"""BART and mBART: learned positions (one table per side, position i reading row i + 2) and an embeddings LayerNorm;
BART is post-LN without final norms and reads no language codes, mBART pre-LN with final norms and reads the source
and target language codes (`en_XX`), its first output forced to the target's when generation does not say otherwise."""
from __future__ import annotations

from typing import Any

from attnscope.checkpoints.importers.hf_families.architecture import Architecture
from attnscope.checkpoints.importers.hf_models import OPTIONAL, SETTINGS, SIZES, architecture, weights
from attnscope.checkpoints.importers.hf_tokens import monolingual, multilingual

BART_LAYOUT = dict(positional="learned", separate_positions=True, norm="post", final_norm=False, embed_norm=True)
MBART_LAYOUT = dict(positional="learned", separate_positions=True, norm="pre", final_norm=True, embed_norm=True)


def bart_fields(config: dict[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of a BART config.json."""
    return architecture(config, BART_LAYOUT)


def mbart_fields(config: dict[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of an mBART config.json."""
    return architecture(config, MBART_LAYOUT)


BART = Architecture("BART", SIZES, OPTIONAL, SETTINGS, bart_fields, weights, monolingual)
MBART = Architecture("mBART", SIZES, OPTIONAL, SETTINGS, mbart_fields, weights, multilingual, languages=True)
