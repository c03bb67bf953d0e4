"""A run's history on disk, so that a resumed run shows it from step 0, not only since the resume.

Validations are read back from the run's `log.jsonl` (the loop writes one line per validation).
Snapshots, the Train page's translation of the user's sentence to watch at each validation with
every head captured, are kept beside the checkpoints as `snapshots/step-<step>.npz`
(`AttentionRecord.to_npz`, with the rest of the snapshot in its metadata).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from attnscope.checkpoints.checkpoint import atomic_write
from attnscope.engine.recording.record_files import read_record, record_meta
from attnscope.records.attention import AttentionRecord, RecordError
from attnscope.training.loop import TrainEvent


@dataclass(frozen=True)
class Validation:
    """One validation of a run: what its learning curves and table show."""

    step: int
    loss: float  # smoothed training loss at this step
    val_loss: float
    bleu: float
    exact: float | None = None  # toy tasks: fraction of held-out sequences transformed exactly right

    @classmethod
    def of(cls, event: TrainEvent) -> "Validation":
        return cls(event.step, event.loss, event.val_loss or 0.0, event.bleu or 0.0, event.exact)


@dataclass(frozen=True)
class Snapshot:
    """The sentence to watch as the model translated it at one validation."""

    step: int
    bleu: float | None
    source: str  # the sentence to watch (a resumed run may watch another one)
    translation: str
    record: AttentionRecord
    generated: tuple[str, ...]  # what each decoding step produced: the rows of the cross-attention map
    hit_limit: bool  # the model never chose <eos>: the output stopped at the length limit
    exact: float | None = None


def read_validations(out_dir: Path, up_to: int) -> list[Validation]:
    """The validations `log.jsonl` records up to step `up_to` (where a resumed run goes on), one per step:
    the latest wins when a stop and a resume validated the same step twice."""
    log = Path(out_dir) / "log.jsonl"
    if not log.is_file():
        return []
    found: dict[int, Validation] = {}
    for line in log.read_text().splitlines():
        try:
            r = json.loads(line)
            if r.get("kind") == "eval" and r["step"] <= up_to:
                found[r["step"]] = Validation(r["step"], r["loss"], r["val_loss"], r["bleu"], r.get("exact"))
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line cut short by a killed run
    return [found[step] for step in sorted(found)]


def snapshot_path(out_dir: Path, step: int) -> Path:
    return Path(out_dir) / "snapshots" / f"step-{step:07d}.npz"


def save_snapshot(out_dir: Path, snap: Snapshot) -> None:
    """Keep `snap` beside the run's checkpoints (atomically: a killed run leaves no half file)."""
    path = snapshot_path(out_dir, snap.step)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {k: v for k, v in asdict(snap).items() if k != "record"}
    data = snap.record.to_npz(meta)
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def read_snapshots(out_dir: Path, up_to: int) -> list[Snapshot]:
    """The snapshots kept for steps up to `up_to`, in step order; unreadable files are skipped."""
    found = []
    for path in sorted((Path(out_dir) / "snapshots").glob("step-*.npz")):
        data = path.read_bytes()
        try:
            meta = record_meta(data)
            snap = Snapshot(int(meta["step"]), meta["bleu"], str(meta["source"]), str(meta["translation"]),
                            read_record(data, path.name), tuple(meta["generated"]), bool(meta["hit_limit"]),
                            meta.get("exact"))
        except (RecordError, KeyError, TypeError, ValueError):
            continue
        if snap.step <= up_to:
            found.append(snap)
    return found
