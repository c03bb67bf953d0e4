"""Background training jobs for the app: one thread per run, progress kept for live views.

The job calls the same `train()` as the CLI. At every validation it also translates a fixed
sample sentence with every head captured, so users can watch attention patterns form. A resumed
job starts with the run's earlier validations and snapshots (training/history.py), so its curves
and table begin at step 0.
"""
from __future__ import annotations

import shutil
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.engine.decoding.translator import Translator
from attnscope.training.config import TrainConfig
from attnscope.training.history import Snapshot, Validation, read_snapshots, read_validations, save_snapshot
from attnscope.training.loop import Trainer, TrainEvent


class Ending(StrEnum):
    """Why a run that did not fail ended: the user's Stop, early stopping, or the end of its schedule."""

    STOPPED_BY_USER = "stopped by the user"
    OUT_OF_PATIENCE = "early stopping"
    MAX_STEPS = "the step limit"
    ALL_EPOCHS = "all epochs"


def existing_run(out_dir: Path) -> dict | None:
    """The training summary of a resumable run in `out_dir` (steps, epochs, ...), or None."""
    last = Path(out_dir) / "last.safetensors"
    if not (last.is_file() and (Path(out_dir) / "last.state.safetensors").is_file()):
        return None
    try:
        return checkpoint.read_bundle(last)[0].summary
    except CheckpointError:
        return None


def free_name(runs_dir: Path, name: str) -> str:
    """`name`, or `name-2`, `name-3`... : the first with no run folder, so a new run never continues an old one."""
    candidate, n = name, 1
    while (Path(runs_dir) / candidate).exists():
        n += 1
        candidate = f"{name}-{n}"
    return candidate


@dataclass
class TrainJob:
    """A training run in a background thread and everything it reported so far."""

    config: TrainConfig
    sample: str
    publish_dir: Path  # where the finished model is copied so every page can select it
    resume: bool = False  # continue the run in config.out_dir; a new run refuses an existing folder
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    events: list[TrainEvent] = field(default_factory=list)  # this job's own, live
    snapshots: list[Snapshot] = field(default_factory=list)  # a resumed run's earlier ones first
    past: list[Validation] = field(default_factory=list)  # a resumed run's validations before this job
    status: str = "starting"  # starting / running / stopping / finished / stopped / failed
    error: str | None = None
    published: Path | None = None
    stopped_early: bool = False  # the run's patience ran out before its last step
    ended_by: Ending | None = None  # None while running, and for a failed run
    started: float = field(default_factory=time.time)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> "TrainJob":
        found = existing_run(Path(self.config.out_dir))
        if found is None and Path(self.config.out_dir, "last.safetensors").exists():
            found = {}
        if self.resume and found is None:
            raise ValueError(f"there is no run named {self.config.run_name} to resume; start a new one")
        if not self.resume and found is not None:
            raise ValueError(f"a run named {self.config.run_name} already exists; resume it or choose another name")
        if self.resume:
            resumed_at = int(found.get("steps", 0))
            self.past = read_validations(Path(self.config.out_dir), resumed_at)
            self.snapshots = read_snapshots(Path(self.config.out_dir), resumed_at)
        self._thread = threading.Thread(target=self._run, name=f"train-{self.id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self.status in ("starting", "running"):
            self.status = "stopping"
        self._stop.set()

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def done(self) -> bool:
        return self.status in ("finished", "stopped", "failed")

    @property
    def last(self) -> TrainEvent | None:
        return self.events[-1] if self.events else None

    def validations(self) -> list[Validation]:
        """Every validation of the run, from step 0: the earlier sessions' and this job's."""
        live = [Validation.of(e) for e in self.events if e.kind == "eval"]
        again = {v.step for v in live}  # a resume that stops at once validates the same step again
        return [v for v in self.past if v.step not in again] + live

    def loss_curve(self) -> tuple[list[int], list[float]]:
        """Steps and smoothed training loss from step 0: at each earlier validation (the log keeps no
        more), then at every step of this job."""
        steps = [e for e in self.events if e.kind == "step"]
        return [v.step for v in self.past] + [e.step for e in steps], [v.loss for v in self.past] + [e.loss for e in steps]

    def eta_seconds(self) -> float | None:
        """Seconds left at the current pace; None unless the run is going (a stopped run has no ETA)."""
        last = self.last
        if self.status != "running" or last is None or last.step <= 0:
            return None
        return last.elapsed / last.step * max(last.total_steps - last.step, 0)

    def _run(self) -> None:
        self.status = "running"
        try:
            self.trainer = Trainer(self.config, self._on_event, self._stop)
            best = self.trainer.run()
            self.published = self._publish(best)
            self.stopped_early = self.trainer.out_of_patience()
            self.ended_by = self._ended_by()
            self.status = "stopped" if self._stop.is_set() else "finished"
        except Exception as err:  # a crashed run must leave the app working and say why
            self.error = f"{type(err).__name__}: {err}"
            self.status = "failed"
            traceback.print_exc()

    def _ended_by(self) -> Ending:
        if self._stop.is_set():
            return Ending.STOPPED_BY_USER
        if self.stopped_early:
            return Ending.OUT_OF_PATIENCE
        limit = self.config.max_steps
        return Ending.MAX_STEPS if limit is not None and self.trainer.state.step >= limit else Ending.ALL_EPOCHS

    def _on_event(self, event: TrainEvent) -> None:
        """Keep the event; at a validation, first the snapshot of the sentence to watch (kept on disk too),
        so a view that sees the validation also finds its snapshot."""
        if event.kind == "eval":
            translator = Translator(self.trainer.model, self.trainer.bundle(), self.trainer.device)
            result = translator.translate(self.sample)
            if result.attention is not None:
                stopped = bool(result.target_ids) and result.target_ids[-1] == translator.model.config.eos_id
                snap = Snapshot(event.step, event.bleu, self.sample, result.text, result.attention,
                                result.output_tokens, not stopped, event.exact)
                save_snapshot(Path(self.config.out_dir), snap)
                self.snapshots = [s for s in self.snapshots if s.step != snap.step] + [snap]
        self.events.append(event)

    def _publish(self, best: Path) -> Path:
        """Copy the best checkpoint into the shared models folder, atomically."""
        self.publish_dir.mkdir(parents=True, exist_ok=True)
        target = self.publish_dir / f"{self.config.run_name}.safetensors"
        checkpoint.atomic_write(target, lambda tmp: shutil.copyfile(best, tmp))
        try:
            checkpoint.read_bundle(target)
        except CheckpointError as err:
            raise RuntimeError(f"the published checkpoint does not load: {err}") from None
        return target


def estimate_epoch_seconds(config: TrainConfig, steps: int = 3) -> tuple[float, int]:
    """Seconds per epoch measured on a few real training steps, and the number of batches."""
    trainer = Trainer(config)
    trainer.setup()
    batches = trainer.epoch_batches(0)
    trainer.train_step(batches[0])  # warm-up
    start = time.perf_counter()
    for idx in batches[1:steps + 1]:
        trainer.train_step(idx)
    per_step = (time.perf_counter() - start) / max(1, min(steps, len(batches) - 1))
    return per_step * len(batches), len(batches)
