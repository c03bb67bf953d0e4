"""`attnscope.load()`: a checkpoint file (default: the shipped en->de) as a ready Translator."""
from __future__ import annotations

import os
from pathlib import Path

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.registry import default_checkpoint
from attnscope.engine.translator import Translator
from attnscope.model.device import pick_device


def load(path: str | os.PathLike[str] | None = None, device: str | None = None) -> Translator:
    """Load a checkpoint (None = the shipped en->de default) as a Translator.

    Raises:
        CheckpointError: the file is missing or not a valid attnscope checkpoint.
    """
    dev = pick_device(device)
    file = Path(path) if path is not None else default_checkpoint()
    model, bundle = checkpoint.load(file, dev)
    return Translator(model, bundle, dev, label=file.stem)
