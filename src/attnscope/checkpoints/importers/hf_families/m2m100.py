"""M2M100 and NLLB: sinusoids of fairseq's frequencies starting at the padding id + 1, pre-LN with final norms, no
embeddings LayerNorm; the tokenizer reads the source and target language codes (`eng_Latn`, `__en__`), the first
output forced to the target's when generation does not say otherwise."""
from __future__ import annotations

from typing import Any

from attnscope.checkpoints.importers.hf_families.architecture import Architecture
from attnscope.checkpoints.importers.hf_models import OPTIONAL, SETTINGS, SIZES, architecture, weights
from attnscope.checkpoints.importers.hf_tokens import multilingual

LAYOUT = dict(positional="sinusoidal", sinusoid="fairseq", norm="pre", final_norm=True, embed_norm=False)


def fields(config: dict[str, Any]) -> dict[str, Any]:
    """ModelConfig fields of an M2M100 or NLLB config.json."""
    return architecture(config, LAYOUT)


M2M100 = Architecture("M2M100/NLLB", SIZES, OPTIONAL, SETTINGS, fields, weights, multilingual, languages=True)
