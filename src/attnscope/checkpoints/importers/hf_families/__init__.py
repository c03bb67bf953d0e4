"""The Hugging Face architectures attnscope imports, one module each, keyed by config.json's `model_type`; and the
ones it refuses, with the reason.

Each module holds everything of its architecture (config.json's sizes and fields, its weights' names, its
tokenizer's rule) as an `Architecture` (architecture.py), built from the plain helpers the others share: the
BART-derived layer layout (hf_models.py), the tokenizer conversions (hf_tokens.py, hf_tokenizers.py, hf_bytes.py)
and the checks of config.json (hf_config.py). A new architecture is one module here and its line below; model_type
strings are spelled nowhere else (tests/test_architecture.py).
"""
from __future__ import annotations

from typing import Any

from attnscope.checkpoints.importers.hf_families import bart, m2m100, marian, t5
from attnscope.checkpoints.importers.hf_families.architecture import Architecture

ARCHITECTURES: dict[str, Architecture] = {"marian": marian.MARIAN, "bart": bart.BART, "mbart": bart.MBART,
                                          "m2m_100": m2m100.M2M100, "t5": t5.T5, "mt5": t5.MT5}
FROM_GENERATE = ("record its attention with attnscope.from_generate(model.generate(..., output_attentions=True, "
                 "return_dict_in_generate=True), ...) instead")
REFUSED = {
    "umt5": "umT5's layers each learn their own relative-position bias, where attnscope's share the first layer's",
    "longt5": "LongT5's local attention and relative positions are not attnscope's attention",
    "fsmt": "FSMT (fairseq's WMT19 models in transformers) is not converted yet",
    "pegasus": "Pegasus is not converted yet",
    "led": "LED's windowed attention is not attnscope's attention",
}


def refusal(kind: str, architectures: Any) -> str:
    """One sentence for a model type attnscope does not import, naming the route that works."""
    known = ", ".join(a.name for a in ARCHITECTURES.values())
    what = REFUSED.get(kind)
    if what is None:
        named = isinstance(architectures, list) and architectures
        arch = architectures[0] if named else kind or "an unknown model type"
        what = f"{arch} (model_type {kind!r}) is not one of the families attnscope converts ({known})"
    return f"{what}: {FROM_GENERATE}"
