"""Background training jobs: runs are never continued by accident, stopped runs have no ETA."""
from __future__ import annotations

from pathlib import Path

import pytest

from attnscope.training.config import TrainConfig
from attnscope.training.jobs import TrainJob, existing_run, free_name
from attnscope.training.loop import TrainEvent
from tests.support import CEILING

TINY = dict(task="reverse", preset="toy", toy_size=200, max_tokens=400, epochs=1, threads=1,
            model={"d_model": 16, "n_heads": 2, "d_ff": 32, "n_encoder_layers": 1, "n_decoder_layers": 1})


def test_free_name_skips_existing_run_folders(tmp_path: Path) -> None:
    assert free_name(tmp_path, "toy-sort") == "toy-sort"
    (tmp_path / "toy-sort").mkdir()
    (tmp_path / "toy-sort-2").mkdir()
    assert free_name(tmp_path, "toy-sort") == "toy-sort-3"


def test_a_new_job_refuses_an_existing_run_and_resume_needs_one(tmp_path: Path) -> None:
    config = TrainConfig(out_dir=str(tmp_path / "runs" / "r"), name="r", **TINY)
    with pytest.raises(ValueError, match="no run named r to resume"):
        TrainJob(config, "a b", tmp_path / "models", resume=True).start()
    first = TrainJob(config, "a b", tmp_path / "models").start()
    first.wait(timeout=CEILING)
    assert first.status == "finished", first.error
    assert existing_run(Path(config.out_dir))["steps"] > 0
    with pytest.raises(ValueError, match="already exists; resume it"):
        TrainJob(config, "a b", tmp_path / "models").start()


def test_a_job_says_when_its_patience_ran_out(tmp_path: Path) -> None:
    frozen = TINY | {"lr": 0.0, "epochs": 50, "eval_every": 2, "bleu_sentences": 10}  # val BLEU can never improve
    job = TrainJob(TrainConfig(out_dir=str(tmp_path / "r"), patience=1, **frozen), "a b", tmp_path / "models").start()
    job.wait(timeout=CEILING)
    assert job.status == "finished" and job.stopped_early, job.error
    assert [e.step for e in job.events if e.kind == "eval"] == [2, 4]


def test_only_a_running_job_has_an_eta(tmp_path: Path) -> None:
    job = TrainJob(TrainConfig(out_dir=str(tmp_path), **TINY), "a b", tmp_path)
    job.events.append(TrainEvent("step", 10, 0, 40, 1.0, 1e-3, 5.0, 100.0))
    job.status = "running"
    assert job.eta_seconds() == pytest.approx(15.0)
    for status in ("stopping", "stopped", "finished", "failed"):
        job.status = status
        assert job.eta_seconds() is None
