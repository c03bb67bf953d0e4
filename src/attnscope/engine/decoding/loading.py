"""`attnscope.load()`: a checkpoint file (default: the shipped en->de) as a ready Translator."""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from torch import nn

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers import import_any, state_dict
from attnscope.checkpoints.registry import default_checkpoint
from attnscope.engine.decoding.translator import Translator
from attnscope.model.device import apply_thread_policy, pick_device

TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def load(path: str | os.PathLike[str] | None = None, device: str | None = None, rules: str | None = None) -> Translator:
    """Load a checkpoint (None = the shipped en->de default) as a Translator decoding by `rules`: "model" or None,
    the rules recorded at import (OpenNMT-py's, fairseq's or the generation_config's defaults), or "attnscope".

    Raises:
        CheckpointError: the file is missing or not a valid attnscope checkpoint.
    """
    dev = pick_device(device)
    apply_thread_policy()
    file = Path(path) if path is not None else default_checkpoint()
    if file.suffix.lower() in TORCH_SUFFIXES:
        raise CheckpointError(f"{file.name} is a PyTorch file, not an attnscope checkpoint: import it with "
                              f"attnscope.import_model('{file}', ...) or python -m attnscope import (see "
                              "docs/importing.md)")
    if file.is_dir() or (path is not None and not file.exists() and "/" in str(path) and file.suffix != ".safetensors"):
        raise CheckpointError(f"{path} is a model folder or hub name, not an attnscope checkpoint: import it once with "
                              f"python -m attnscope import {path} --out model.safetensors, or attnscope.import_model('{path}')")
    model, bundle = checkpoint.load(file, dev)
    return Translator(model, bundle, dev, label=file.stem, rules=rules)


def import_model(model_or_path: nn.Module | str | os.PathLike[str], src_vocab: Any = None, tgt_vocab: Any = None, *,
                 src_lang: str | None = None, tgt_lang: str | None = None, source_framing: str | None = None,
                 device: str | None = None, rules: str | None = None, **kw: Any) -> Translator:
    """A model trained elsewhere as a Translator: a Hugging Face folder, zip or hub name (MarianMT, BART, mBART,
    M2M100/NLLB, T5/mT5/ByT5), a fairseq or OpenNMT-py checkpoint, a .pt/.pth state_dict file, or a live nn.Module.

    Hugging Face, fairseq and OpenNMT-py models carry their own settings and tokenizers; a multilingual one needs
    `src_lang`/`tgt_lang` as its codes (en_XX, eng_Latn...). For a state_dict or a live module, `src_vocab`/`tgt_vocab`
    are a token list or a path to a tokenizer.json, a JSON list of tokens or a file with one token a line
    (`tgt_vocab=None`: one joint vocabulary). Other keywords: `specials`, `tgt_specials`, `examples` (source sentences
    with your model's outputs, to check the import), `max_len`, `name`, and for a file the settings a state_dict
    cannot show (n_heads, norm_first, activation, norm_eps, embed_scale). `translator.bundle.summary["import"]` says
    how each was settled; settings nobody checked are also named in a warning. `rules` as for `load`.

    Raises:
        CheckpointError: the model or a vocabulary cannot be imported; the message says what was found.
    """
    if source_framing is not None:
        kw["source_framing"] = source_framing
    if isinstance(model_or_path, nn.Module):
        imported = state_dict.import_module(model_or_path, src_vocab, tgt_vocab, src_lang=src_lang or "src",
                                           tgt_lang=tgt_lang or "tgt", **kw)
    else:
        imported = import_any(model_or_path, src_vocab=src_vocab, tgt_vocab=tgt_vocab, src_lang=src_lang,
                              tgt_lang=tgt_lang, **kw)
    dev = pick_device(device)
    apply_thread_policy()
    if imported.report.unchecked:
        warnings.warn(imported.report.lines()[-1 - len(imported.report.notes)], stacklevel=2)
    for note in imported.report.notes:
        warnings.warn(note, stacklevel=2)
    label = str(kw.get("name") or imported.bundle.summary.get("name", "imported"))
    return Translator(imported.model.to(dev), imported.bundle, dev, label=label, rules=rules)
