"""Background training jobs: runs are never continued by accident, stopped runs have no ETA."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from attnscope.training.config import TrainConfig
from attnscope.training.jobs import Ending, TrainJob, existing_run, free_name
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


def test_a_job_says_why_it_ended(tmp_path: Path) -> None:
    limited = TrainJob(TrainConfig(out_dir=str(tmp_path / "a"), max_steps=2, **(TINY | {"epochs": 50})), "a b",
                       tmp_path / "models").start()
    whole = TrainJob(TrainConfig(out_dir=str(tmp_path / "b"), **TINY), "a b", tmp_path / "models").start()
    for job in (limited, whole):
        job.wait(timeout=CEILING)
        assert job.status == "finished", job.error
    assert limited.ended_by == Ending.MAX_STEPS and limited.last.step == 2
    assert whole.ended_by == Ending.ALL_EPOCHS
    stopped = TrainJob(TrainConfig(out_dir=str(tmp_path / "c"), **(TINY | {"epochs": 200})), "a b", tmp_path / "models")
    stopped.start().stop()
    stopped.wait(timeout=CEILING)
    assert stopped.status == "stopped" and stopped.ended_by == Ending.STOPPED_BY_USER


def test_a_resumed_job_starts_with_the_runs_history(tmp_path: Path) -> None:
    config = TrainConfig(out_dir=str(tmp_path / "r"), name="r", **(TINY | {"epochs": 50, "eval_every": 3, "max_steps": 7}))
    first = TrainJob(config, "a b c", tmp_path / "models").start()
    first.wait(timeout=CEILING)
    assert first.status == "finished", first.error
    evals = [e.step for e in first.events if e.kind == "eval"]
    assert evals == [3, 6, 7] and [s.step for s in first.snapshots] == evals
    again = TrainJob(dataclasses.replace(config, max_steps=9), "b c", tmp_path / "models", resume=True).start()
    assert [v.step for v in again.past] == evals and [s.step for s in again.snapshots] == evals
    assert [s.source for s in again.snapshots] == ["a b c"] * 3  # what was watched then, not the new sentence
    again.wait(timeout=CEILING)
    assert [v.step for v in again.validations()] == [3, 6, 7, 9]
    assert [s.source for s in again.snapshots] == ["a b c"] * 3 + ["b c"]
    steps, losses = again.loss_curve()
    assert steps == [3, 6, 7, 8, 9] and losses[:3] == [v.loss for v in again.past]


def test_a_run_of_all_its_epochs_ends_at_its_total_and_says_its_epochs_as_its_checkpoint_does(tmp_path: Path) -> None:
    """Buckets of 100 sentences, shuffled per epoch, give this corpus 43, 43 and 42 batches: a total of epochs x the
    first epoch's count (129) left the finished run at "step 128/129"; the status said whole epochs while the
    checkpoint's summary (the page's notice) said 2.93."""
    from attnscope.checkpoints import checkpoint
    config = TrainConfig(out_dir=str(tmp_path / "r"), name="r", **(TINY | {"toy_size": 250, "max_tokens": 59, "epochs": 3}))
    job = TrainJob(config, "a b", tmp_path / "models").start()
    job.wait(timeout=CEILING)
    assert job.status == "finished" and job.ended_by == Ending.ALL_EPOCHS, job.error
    counts = [len(job.trainer.epoch_batches(e)) for e in range(3)]
    assert len(set(counts)) > 1  # the case this test is about
    assert job.last.step == job.last.total_steps == sum(counts)
    mid = next(e for e in job.events if e.step == counts[0] + 10)
    assert mid.epoch == round(1 + 10 / counts[1], 2)
    summary = checkpoint.read_bundle(Path(config.out_dir) / "last.safetensors")[0].summary
    assert job.last.epoch == summary["epochs"] == 3


def test_tokens_per_second_after_a_resume_count_only_this_sessions_time(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The rate divided this session's tokens by the training time of every session: a resumed run looked slower."""
    from attnscope.training import loop
    config = TrainConfig(out_dir=str(tmp_path / "r"), name="r", **(TINY | {"epochs": 50, "max_steps": 2}))
    first = TrainJob(config, "a b", tmp_path / "models").start()
    first.wait(timeout=CEILING)
    load = loop.load_training_state

    def long_ago(*args: object, **kwargs: object) -> object:  # the earlier sessions trained for 11 days
        state = load(*args, **kwargs)
        state.elapsed += 1e6
        return state

    monkeypatch.setattr(loop, "load_training_state", long_ago)
    again = TrainJob(dataclasses.replace(config, max_steps=4), "a b", tmp_path / "models", resume=True).start()
    again.wait(timeout=CEILING)
    assert again.status == "finished", again.error
    step = next(e for e in again.events if e.kind == "step")
    assert step.elapsed > 1e6 and step.tokens_per_second > 1  # tokens / 1e6 s would be far below 1
