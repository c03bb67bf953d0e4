"""A Hugging Face translation model (MarianMT, BART, mBART, M2M100/NLLB) as an attnscope model that computes
what transformers computes: the same logits, attention weights and tokens (tests/checkpoints/test_huggingface.py).

The folder's config.json fixes the architecture (hf_models.py), its tokenizer and generation settings fix
the vocabularies and token-level behaviour (hf_tokens.py); nothing is guessed, so nothing needs checking
against the user's outputs. Other model types are refused with the route that works for them.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from attnscope.checkpoints.checkpoint import Bundle, CheckpointError
from attnscope.checkpoints.decoding_rules import KEY as RULES_KEY
from attnscope.checkpoints.decoding_rules import hf_generation
from attnscope.checkpoints.importers.hf_config import check_config
from attnscope.checkpoints.importers.hf_files import HFFolder, located, open_folder
from attnscope.checkpoints.importers.hf_models import architecture, embeddings, layers
from attnscope.checkpoints.importers.hf_tokens import load_tokenizer, size_note, tokens
from attnscope.checkpoints.importing import Imported, ImportReport, build, checked
from attnscope.model.config import ConfigError, ModelConfig

FAMILIES = {"marian": "MarianMT", "bart": "BART", "mbart": "mBART", "m2m_100": "M2M100/NLLB"}
FROM_GENERATE = ("record its attention with attnscope.from_generate(model.generate(..., output_attentions=True, "
                 "return_dict_in_generate=True), ...) instead")
REFUSED = {
    "t5": "T5's attention adds learned relative-position buckets, which attnscope's model does not compute",
    "mt5": "mT5's attention adds learned relative-position buckets, which attnscope's model does not compute",
    "umt5": "umT5's attention adds learned relative-position buckets, which attnscope's model does not compute",
    "longt5": "LongT5's local attention and relative positions are not attnscope's attention",
    "fsmt": "FSMT (fairseq's WMT19 models in transformers) is not converted yet",
    "pegasus": "Pegasus is not converted yet",
    "led": "LED's windowed attention is not attnscope's attention",
}
SETTINGS = ("activation", "norm", "final_norm", "positional", "sinusoid", "position_offset", "embed_norm", "embed_scale",
            "source_framing", "source_prefix", "source_suffix", "decoder_start", "forced_first", "suppressed")


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
    tok = load_tokenizer(folder, src_lang, tgt_lang)
    found = tokens(folder, tok, src_lang, tgt_lang)
    fields = architecture(folder.config)
    state = folder.weights()
    tensors = layers(state, fields)
    vocab, share, tie = embeddings(state, folder.config, found.src, found.tgt)
    tensors |= vocab
    try:
        config = ModelConfig(src_vocab_size=found.src.size, tgt_vocab_size=found.tgt.size, tie_embeddings=tie,
                             share_embeddings=share, **fields, **found.fields)
    except ConfigError as err:
        raise CheckpointError(f"this model does not make a valid attnscope config: {err}") from None
    model = build(config, checked(tensors))
    family = f"Hugging Face {FAMILIES[kind]} ({type(tok).__name__})"
    settings = {k: getattr(config, k) for k in SETTINGS}
    note = size_note(tok, found)
    report = ImportReport(family, settings, {k: "config.json" for k in settings}, notes=(note,) if note else ())
    rules = hf_generation(folder.setting, tok.eos_token_id)  # generate()'s rules, recorded for decoding by default
    summary = {"data": f"imported {family} from {folder.path.name}", "name": label, "import": report.lines(),
               RULES_KEY: rules.to_dict()}
    bundle = Bundle(config, found.src_codec, found.tgt_codec, *found.langs, summary)
    return Imported(model, bundle, report, found.src.order, found.tgt.order)


def refusal(kind: str, architectures: Any) -> str:
    """One sentence for a model type attnscope does not import, naming the route that works."""
    known = ", ".join(FAMILIES.values())
    what = REFUSED.get(kind)
    if what is None:
        arch = architectures[0] if isinstance(architectures, list) and architectures else kind or "an unknown model type"
        what = f"{arch} (model_type {kind!r}) is not one of the families attnscope converts ({known})"
    return f"{what}: {FROM_GENERATE}"

