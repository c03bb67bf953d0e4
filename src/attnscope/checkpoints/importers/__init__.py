"""Importers of models trained elsewhere, one module per family, and the dispatcher that picks one.

`import_any(source, ...)` serves `python -m attnscope import`, `attnscope.import_model` and the
Checkpoints page. What `source` is decides the route:
- a Hugging Face folder (config.json), a zip of one, its model.safetensors/pytorch_model.bin, or a hub
  name: huggingface.py (MarianMT, BART, mBART, M2M100/NLLB);
- a fairseq transformer checkpoint (its `args`/`cfg` beside the weights, dict.*.txt beside the file):
  fairseq.py;
- an OpenNMT-py v3 checkpoint (`model`, `generator`, `vocab`, `opt`): opennmt.py;
- any other .pt/.pth state_dict, with vocabularies given: ../importing.py (nn.Transformer, Annotated
  Transformer).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from attnscope.checkpoints.checkpoint import FORMAT, CheckpointError
from attnscope.checkpoints.importers.hf_files import HUB_NAME, is_hf_folder
from attnscope.checkpoints.importing import Imported, import_file

HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
STATE_DICT_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def import_any(source: str | os.PathLike[str], *, src_vocab: Any = None, tgt_vocab: Any = None,
               src_lang: str | None = None, tgt_lang: str | None = None, name: str | None = None,
               cache_dir: str | os.PathLike[str] | None = None, **settings: Any) -> Imported:
    """Import whatever `source` is (see the module docstring); `settings` are the state_dict importer's."""
    from attnscope.checkpoints.importers import fairseq, opennmt
    from attnscope.checkpoints.importers.huggingface import import_hf

    path = Path(source).expanduser()
    given = sorted(k for k, v in settings.items() if v not in (None, (), []))
    if given and not (path.is_file() and path.suffix.lower() in STATE_DICT_SUFFIXES):
        raise CheckpointError(f"{', '.join(given)} can only be given for a state_dict: a model's own files say them, leave "
                              "them out")
    if path.is_file() and (path.name in HF_WEIGHTS or path.suffix == ".safetensors"):
        if is_hf_folder(path.parent):
            path = path.parent
        else:
            raise CheckpointError(_lone_weights(path))
    if path.is_dir() or (path.is_file() and path.suffix.lower() == ".zip") or (not path.exists() and HUB_NAME.match(str(source))):
        return import_hf(path if path.exists() else str(source), src_lang=src_lang, tgt_lang=tgt_lang, name=name,
                         cache_dir=cache_dir)
    if not path.is_file():
        raise CheckpointError(f"{source} does not exist: give a model folder, a zip of one, a hub name or a checkpoint file")
    found = fairseq.recognise(path) or opennmt.recognise(path)
    if found is not None:
        if given:
            raise CheckpointError(f"{', '.join(given)} can only be given for a state_dict: a {found.framework} "
                                  "checkpoint says them itself, leave them out")
        return found.load(src_lang=src_lang, tgt_lang=tgt_lang, name=name, vocabularies=(src_vocab, tgt_vocab))
    if src_vocab is None:
        raise CheckpointError(f"{path.name} is a state_dict without its vocabularies: give the source vocabulary "
                              "(--src-vocab, src_vocab=...) and the target one if it differs")
    return import_file(path, src_vocab, tgt_vocab, src_lang=src_lang or "src", tgt_lang=tgt_lang or "tgt",
                       name=name or path.stem, **settings)


def _lone_weights(path: Path) -> str:
    """What to do with a weights file given without its folder."""
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            if (f.metadata() or {}).get("format") == FORMAT:
                return f"{path.name} is already an attnscope checkpoint: open it with attnscope.load('{path}') or the app"
    except Exception:  # not a safetensors file: say what the import needs anyway
        pass
    return (f"{path.name} holds a model's weights without its settings: import the whole Hugging Face folder (with "
            "config.json and the tokenizer files), a zip of it, or its hub name")
