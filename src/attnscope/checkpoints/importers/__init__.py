"""Importers of models trained elsewhere, one module per family, and the dispatcher that picks one.

`import_any(source, ...)` serves `python -m attnscope import`, `attnscope.import_model` and the
Checkpoints page. What `source` is decides the route:
- a Hugging Face folder (config.json), a zip of one, its model.safetensors/pytorch_model.bin, or a hub
  name: huggingface.py (MarianMT, BART, mBART, M2M100/NLLB, T5/mT5/ByT5: one module per architecture in
  hf_families/, picked by config.json's model_type);
- a fairseq transformer checkpoint (its `args`/`cfg` beside the weights, dict.*.txt beside the file):
  fairseq.py;
- an OpenNMT-py v3 checkpoint (`model`, `generator`, `vocab`, `opt`): opennmt.py;
- any other .pt/.pth state_dict, with vocabularies given: state_dict.py (nn.Transformer, Annotated
  Transformer).
Each is a family (assemble.Family) made into a model by the one assemble step (assemble.py).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from attnscope.checkpoints.boundary import boundary, shown
from attnscope.checkpoints.checkpoint import FORMAT, CheckpointError
from attnscope.checkpoints.importers.hf_files import is_hf_folder, is_hub_name
from attnscope.checkpoints.importers.parts import Imported
from attnscope.checkpoints.importers.state_dict import import_file
from attnscope.checkpoints.importers.torch_files import read_state_dict

HF_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
STATE_DICT_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def import_any(source: str | os.PathLike[str], *, src_vocab: Any = None, tgt_vocab: Any = None,
               src_lang: str | None = None, tgt_lang: str | None = None, name: str | None = None,
               cache_dir: str | os.PathLike[str] | None = None, **settings: Any) -> Imported:
    """Import whatever `source` is (see the module docstring); `settings` are the state_dict importer's.

    Raises:
        CheckpointError: one sentence naming `source` and the cause, whatever went wrong (boundary.py).
    """
    with boundary(source):
        return route(source, src_vocab=src_vocab, tgt_vocab=tgt_vocab, src_lang=src_lang, tgt_lang=tgt_lang, name=name,
                      cache_dir=cache_dir, **settings)


def route(source: str | os.PathLike[str], *, src_vocab: Any = None, tgt_vocab: Any = None, src_lang: str | None = None,
          tgt_lang: str | None = None, name: str | None = None, cache_dir: str | os.PathLike[str] | None = None,
          **settings: Any) -> Imported:
    """import_any without its boundary, for a caller whose own boundary names the input (uploads.py: not a temp path)."""
    from attnscope.checkpoints.importers import fairseq, opennmt
    from attnscope.checkpoints.importers.huggingface import import_hf

    path = _path(source)
    given = sorted(k for k, v in settings.items() if v not in (None, (), []))
    if given and not (path.is_file() and path.suffix.lower() in STATE_DICT_SUFFIXES):
        raise CheckpointError(f"{', '.join(given)} can only be given for a state_dict: a model's own files say them, leave "
                              "them out")
    if path.is_file() and (path.name in HF_WEIGHTS or path.suffix == ".safetensors"):
        if is_hf_folder(path.parent):
            path = path.parent
        else:
            raise CheckpointError(_lone_weights(path))
    if path.is_dir() or (path.is_file() and path.suffix.lower() == ".zip") or (not path.exists() and is_hub_name(str(source))):
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
        read_state_dict(path.read_bytes(), path.name)  # a file that holds no state_dict says what it holds instead
        raise CheckpointError(f"{path.name} is a state_dict without its vocabularies: give the source vocabulary "
                              "(--src-vocab, src_vocab=...) and the target one if it differs")
    return import_file(path, src_vocab, tgt_vocab, src_lang=src_lang or "src", tgt_lang=tgt_lang or "tgt",
                       name=name or path.stem, **settings)


def _path(source: str | os.PathLike[str]) -> Path:
    """`source` as a path, refusing what no file system or hub could hold: nothing, or a name too long to look up."""
    text = os.fspath(source)
    if not str(text).strip():
        raise CheckpointError("no model was given: give a model folder, a zip of one, a hub name or a checkpoint file")
    path = Path(text).expanduser()
    try:
        path.exists()
    except (OSError, ValueError) as err:  # a name too long for the file system, a NUL byte
        raise CheckpointError(f"{shown(source)} is neither a file nor a hub name ({getattr(err, 'strerror', None) or err})"
                              ) from None
    return path


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
