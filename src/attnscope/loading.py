"""Find and load checkpoints: `attnscope.load()` and the shipped defaults."""
from __future__ import annotations

import os
from pathlib import Path

from attnscope import checkpoint
from attnscope.device import pick_device
from attnscope.translator import Translator

CHECKPOINTS_ENV = "ATTNSCOPE_CHECKPOINTS"
DEFAULT_CHECKPOINT = "multi30k-en-de.safetensors"


def shipped_dir() -> Path:
    """The repository's checkpoints/ folder (or $ATTNSCOPE_CHECKPOINTS)."""
    return Path(os.environ.get(CHECKPOINTS_ENV) or Path(__file__).resolve().parents[2] / "checkpoints")


def default_checkpoint() -> Path:
    return shipped_dir() / DEFAULT_CHECKPOINT


def load(path: str | os.PathLike[str] | None = None, device: str | None = None) -> Translator:
    """Load a checkpoint (None = the shipped en->de default) as a Translator.

    Raises:
        CheckpointError: the file is missing or not a valid attnscope checkpoint.
    """
    dev = pick_device(device)
    file = Path(path) if path is not None else default_checkpoint()
    model, bundle = checkpoint.load(file, dev)
    return Translator(model, bundle, dev, label=file.stem)
