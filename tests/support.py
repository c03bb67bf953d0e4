"""Helpers shared by the app and browser tests."""
from __future__ import annotations

import shutil
from pathlib import Path

from attnscope.training.loop import TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]


def train_toy_checkpoint(run_dir: Path, folder: Path) -> Path:
    """Train a tiny model to reverse letter strings (seconds) and put it in `folder`."""
    best = train(TrainConfig(out_dir=str(run_dir), task="reverse", preset="toy", toy_size=2000, max_tokens=600,
                             lr=3e-3, warmup=100, epochs=24, threads=1, src_lang="en", tgt_lang="en",
                             name="toy-reverse"))
    target = folder / "toy-reverse.safetensors"
    shutil.copy(best, target)
    return target


def shown(element: object) -> str:
    """What a message element displays: its markdown body with backslash escapes removed."""
    import re
    return re.sub(r"\\(.)", r"\1", str(getattr(element, "value", element)))


def tensors_and_meta(path: Path) -> tuple[dict, dict[str, str]]:
    """Every tensor and the metadata of a safetensors file (to build damaged copies in tests)."""
    from safetensors import safe_open
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
