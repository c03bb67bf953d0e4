"""A run's history on disk: validations read back from log.jsonl, snapshots kept and read back exactly."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from attnscope.training.history import Snapshot, Validation, read_snapshots, read_validations, save_snapshot
from tests.record_fixtures import pattern_record


def write_log(run: Path, records: list[dict]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_validations_up_to_the_resumed_step_one_per_step(tmp_path: Path) -> None:
    write_log(tmp_path, [
        {"kind": "eval", "step": 50, "epoch": 1, "loss": 2.0, "val_loss": 1.9, "bleu": 10.0, "exact": 0.1},
        {"kind": "eval", "step": 80, "epoch": 1, "loss": 1.5, "val_loss": 1.4, "bleu": 20.0, "exact": 0.2},
        {"kind": "eval", "step": 80, "epoch": 1, "loss": 1.5, "val_loss": 1.3, "bleu": 21.0, "exact": 0.3},  # resumed, stopped
        {"kind": "eval", "step": 120, "epoch": 2, "loss": 1.0, "val_loss": 0.9, "bleu": 30.0},  # after the resume point
    ])
    with (tmp_path / "log.jsonl").open("a") as f:
        f.write('{"kind": "eval", "step": 1')  # a line cut short by a killed run
    assert read_validations(tmp_path, 80) == [Validation(50, 2.0, 1.9, 10.0, 0.1), Validation(80, 1.5, 1.3, 21.0, 0.3)]
    assert read_validations(tmp_path, 500)[-1] == Validation(120, 1.0, 0.9, 30.0, None)
    assert read_validations(tmp_path / "none", 80) == []


def test_a_snapshot_reads_back_exactly(tmp_path: Path) -> None:
    record = pattern_record("previous")
    snaps = [Snapshot(step, 12.5, "a b .", "b a .", record, ("x", "y", "x"), step == 10, 0.25) for step in (10, 20)]
    for snap in reversed(snaps):
        save_snapshot(tmp_path, snap)
    (tmp_path / "snapshots" / "step-0000015.npz").write_bytes(b"not a record")  # skipped, not a crash
    back = read_snapshots(tmp_path, 20)
    assert [s.step for s in back] == [10, 20] and [s.step for s in read_snapshots(tmp_path, 15)] == [10]
    for got, want in zip(back, snaps):
        assert (got.step, got.bleu, got.source, got.translation, got.generated, got.hit_limit, got.exact) == (
            want.step, want.bleu, want.source, want.translation, want.generated, want.hit_limit, want.exact)
        assert got.record.source_tokens == record.source_tokens and got.record.target_tokens == record.target_tokens
        for kind in ("encoder", "decoder", "cross"):
            np.testing.assert_array_equal(got.record.array(kind), record.array(kind))
