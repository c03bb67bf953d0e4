"""`attnscope.load()`: a checkpoint file (default: the shipped en->de) as a ready Translator."""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from torch import nn

from attnscope.checkpoints import checkpoint, importing
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.registry import default_checkpoint
from attnscope.engine.translator import Translator
from attnscope.model.device import pick_device

TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def load(path: str | os.PathLike[str] | None = None, device: str | None = None) -> Translator:
    """Load a checkpoint (None = the shipped en->de default) as a Translator.

    Raises:
        CheckpointError: the file is missing or not a valid attnscope checkpoint.
    """
    dev = pick_device(device)
    file = Path(path) if path is not None else default_checkpoint()
    if file.suffix.lower() in TORCH_SUFFIXES:
        raise CheckpointError(f"{file.name} is a PyTorch file, not an attnscope checkpoint: import it with "
                              f"attnscope.import_model('{file}', src_vocab=..., tgt_vocab=...) or "
                              "python -m attnscope import (see README, 'Bring your own model')")
    model, bundle = checkpoint.load(file, dev)
    return Translator(model, bundle, dev, label=file.stem)


def import_model(model_or_path: nn.Module | str | os.PathLike[str], src_vocab: Any, tgt_vocab: Any = None, *,
                 src_lang: str = "src", tgt_lang: str = "tgt", source_framing: str | None = None,
                 device: str | None = None, **kw: Any) -> Translator:
    """A model trained elsewhere as a Translator: a live nn.Module, or a .pt/.pth state_dict file.

    `src_vocab`/`tgt_vocab` are a token list or a path to a tokenizer.json, a JSON list of tokens or a
    file with one token a line (`tgt_vocab=None`: one joint vocabulary). Other keywords: `specials`,
    `tgt_specials`, `examples` (source sentences with your model's outputs, to check the import), `max_len`,
    `name`, and for a file the settings a state_dict cannot show (n_heads, norm_first, activation,
    norm_eps, embed_scale). `translator.bundle.summary["import"]` says how each was settled; settings
    nobody checked are also named in a warning.

    Raises:
        CheckpointError: the model or a vocabulary cannot be imported; the message says what was found.
    """
    if source_framing is not None:
        kw["source_framing"] = source_framing
    common = dict(src_lang=src_lang, tgt_lang=tgt_lang, **kw)
    if isinstance(model_or_path, nn.Module):
        imported = importing.import_module(model_or_path, src_vocab, tgt_vocab, **common)
    else:
        imported = importing.import_file(model_or_path, src_vocab, tgt_vocab, **common)
    dev = pick_device(device)
    if imported.report.unchecked:
        warnings.warn(imported.report.lines()[-1], stacklevel=2)
    return Translator(imported.model.to(dev), imported.bundle, dev, label=str(kw.get("name", "imported")))
