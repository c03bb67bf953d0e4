"""Where a run stands (TrainState) and the resume file that keeps it with Adam's moments.

`last.state.safetensors` holds the optimizer moments by parameter name and, as JSON metadata
`meta`, the TrainState fields: step, epoch, batch, best_bleu, elapsed, history.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import atomic_write
from attnscope.model.transformer import Transformer


@dataclass
class TrainState:
    """Loop counters of one run: enough to resume exactly where it stopped."""

    step: int = 0  # optimizer steps taken
    epoch: int = 0  # epochs finished
    batch: int = 0  # batches of the current epoch already trained on
    best_bleu: float = -1.0  # best validation BLEU of this run (-1: none yet)
    elapsed: float = 0.0  # training seconds, summed over resumes
    history: list[dict[str, Any]] = field(default_factory=list)  # one {"step", "val_loss", "bleu"} per validation

    def validations_since_best(self) -> int:
        """How many validations came after the best val BLEU (its first occurrence); 0 before any."""
        if not self.history:
            return 0
        bleus = [h["bleu"] for h in self.history]
        return len(bleus) - 1 - bleus.index(max(bleus))

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> "TrainState":
        """The state stored in a resume file's metadata (unknown keys are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in meta.items() if k in names})


def save_training_state(path: Path, optimizer: torch.optim.Optimizer, model: Transformer, state: TrainState) -> None:
    """Adam moments by parameter name plus the loop counters, in safetensors (no pickle)."""
    names = {id(p): n for n, p in checkpoint.unique_state_params(model).items()}
    tensors = {}
    for p, moments in optimizer.state.items():
        for key in ("exp_avg", "exp_avg_sq"):
            tensors[f"{names[id(p)]}::{key}"] = moments[key].detach().cpu().contiguous()
    meta = json.dumps(dataclasses.asdict(state))
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={"meta": meta}))


def load_training_state(path: Path, optimizer: torch.optim.Optimizer, model: Transformer) -> TrainState:
    """Put the saved moments back into `optimizer`; returns the saved counters."""
    params = checkpoint.unique_state_params(model)
    with safe_open(str(path), framework="pt") as f:
        state = TrainState.from_meta(json.loads(f.metadata()["meta"]))
        for name, p in params.items():
            if f"{name}::exp_avg" in f.keys():
                optimizer.state[p] = {"step": torch.tensor(float(state.step)),
                                      "exp_avg": f.get_tensor(f"{name}::exp_avg").to(p.device),
                                      "exp_avg_sq": f.get_tensor(f"{name}::exp_avg_sq").to(p.device)}
    return state
