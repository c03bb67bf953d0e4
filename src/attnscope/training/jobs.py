"""Background training jobs for the app: one thread per run, progress kept for live views.

The job calls the same `train()` as the CLI. At every validation it also translates a fixed
sample sentence with every head captured, so users can watch attention patterns form.
"""
from __future__ import annotations

import shutil
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.engine.record import AttentionRecord
from attnscope.engine.translator import Translator
from attnscope.training.config import TrainConfig
from attnscope.training.loop import Trainer, TrainEvent


@dataclass(frozen=True)
class Snapshot:
    """The sample sentence as the model translated it at one validation."""

    step: int
    bleu: float | None
    translation: str
    record: AttentionRecord


@dataclass
class TrainJob:
    """A training run in a background thread and everything it reported so far."""

    config: TrainConfig
    sample: str
    publish_dir: Path  # where the finished model is copied so every page can select it
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    events: list[TrainEvent] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    status: str = "starting"  # starting / running / stopping / finished / stopped / failed
    error: str | None = None
    published: Path | None = None
    started: float = field(default_factory=time.time)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> "TrainJob":
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

    def _run(self) -> None:
        self.status = "running"
        try:
            self.trainer = Trainer(self.config, self._on_event, self._stop)
            best = self.trainer.run()
            self.published = self._publish(best)
            self.status = "stopped" if self._stop.is_set() else "finished"
        except Exception as err:  # a crashed run must leave the app working and say why
            self.error = f"{type(err).__name__}: {err}"
            self.status = "failed"
            traceback.print_exc()

    def _on_event(self, event: TrainEvent) -> None:
        self.events.append(event)
        if event.kind == "eval":
            translator = Translator(self.trainer.model, self.trainer.bundle(), self.trainer.device)
            result = translator.translate(self.sample)
            if result.attention is not None:
                self.snapshots.append(Snapshot(event.step, event.bleu, result.text, result.attention))

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
