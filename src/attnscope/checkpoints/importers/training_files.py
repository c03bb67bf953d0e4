"""Checkpoints that training frameworks write (fairseq, OpenNMT-py): weights beside their settings, read safely.

Both frameworks keep their settings as an `argparse.Namespace`. The file is read with
`torch.load(weights_only=True)` allowing that one class and nothing else, so nothing in it runs;
a file that needs any other class is refused with what it holds and how to strip it.
"""
from __future__ import annotations

import argparse
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from tokenizers import Tokenizer, models, pre_tokenizers

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.hf_tokenizers import id_map
from attnscope.checkpoints.importers.torch_files import pickled_model
from attnscope.checkpoints.importers.vocab_plan import VocabPlan
from attnscope.model.budget import over_budget
from attnscope.model.tokenization import TextCodec

FRAMEWORKS = ("fairseq", "onmt", "omegaconf")
STRIP = ("python -c \"import torch; c = torch.load('{name}', weights_only=False); torch.save({{k: c[k] for k in {keys}}}, "
         "'model-only.pt')\"")


@dataclass(frozen=True)
class Recognised:
    """A checkpoint one importer recognised, and how to import it."""

    framework: str
    load: Callable[..., Any]  # (src_lang=, tgt_lang=, name=, vocabularies=) -> Imported


def read(path: Path) -> dict[str, Any] | None:
    """The checkpoint's top-level dict, or None when it is not a dict loadable with Namespace allowed (a plain
    state_dict is loadable: the caller tells them apart by their keys)."""
    refused = over_budget(path.stat().st_size, f"reading {path.name}")
    if refused:
        raise CheckpointError(refused)
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        if found and (found[1].split(".")[0] in FRAMEWORKS or not pickled_model(found[1])):  # a model: state_dict's words
            raise CheckpointError(f"{path.name} holds {found[1]} objects besides its weights and settings, which "
                                  "attnscope never unpickles because that would run their code: keep only the model and "
                                  "its settings with " + STRIP.format(name=path.name, keys="('args', 'cfg', 'model')")
                                  + " (fairseq; of OpenNMT-py keep model, generator, vocab and opt) and import that") from None
        return None
    except Exception:  # not a torch file, a truncated one...: the state_dict importer says what it is
        return None
    return obj if isinstance(obj, dict) else None


def setting(holder: Any, name: str, default: Any = None) -> Any:
    """A setting from an argparse.Namespace or a dict."""
    if isinstance(holder, dict):
        return holder.get(name, default)
    return getattr(holder, name, default)


def word_codec(tokens: list[str], plan: VocabPlan, unk: str, special: set[int], *,
               replace: tuple[tuple[str, str], ...] = (), strip: bool = False) -> TextCodec:
    """Text split at whitespace into the vocabulary's tokens (unknown ones read as <unk>); decoding joins them with
    spaces, then applies the framework's post-processing (`replace`)."""
    if len(set(tokens)) < len(tokens):
        raise CheckpointError("the vocabulary lists a token twice: one token a line, each once")
    raw = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token=unk))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return TextCodec(raw, id_map(range(len(tokens)), plan, tokens.__getitem__, special, strip=strip, replace=replace))
