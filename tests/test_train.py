"""Training: schedule, a toy task learned for real, exact resume, DDP on CPU, the CLI."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from attnscope.checkpoints import checkpoint
from attnscope.engine.translator import Translator
from attnscope.training.config import TrainConfig, parse_args
from attnscope.training.data import toy_pairs
from attnscope.training.loop import lr_at, train
from attnscope.training.state import TrainState, load_training_state, save_training_state

TOY = dict(task="reverse", preset="toy", toy_size=2000, max_tokens=600, lr=3e-3, warmup=100, threads=1)


def test_learning_rate_warms_up_then_decays() -> None:
    assert lr_at(50, 1e-3, 100) == pytest.approx(5e-4)
    assert lr_at(100, 1e-3, 100) == pytest.approx(1e-3)
    assert lr_at(400, 1e-3, 100) == pytest.approx(5e-4)


def test_a_toy_task_is_learned(tmp_path: Path) -> None:
    events = []
    best = train(TrainConfig(out_dir=str(tmp_path), epochs=25, **TOY), progress=events.append)
    translator = Translator(*checkpoint.load(best))
    pairs = toy_pairs("reverse", 100, seed=999)
    hyps = translator.translate_batch([s for s, _ in pairs])
    accuracy = sum(h == t for h, (_, t) in zip(hyps, pairs)) / len(pairs)
    assert accuracy >= 0.9, accuracy
    kinds = {e.kind for e in events}
    assert kinds == {"step", "eval", "done"}
    assert [json.loads(line)["kind"] for line in (tmp_path / "log.jsonl").read_text().splitlines()] == ["eval"] * 25


def test_every_checkpoint_of_a_validation_knows_its_score(tmp_path: Path) -> None:
    train(TrainConfig(out_dir=str(tmp_path), epochs=3, keep_evals=True, **TOY))
    evals = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    for i, e in enumerate(evals):
        summary = checkpoint.read_bundle(tmp_path / f"eval-{e['step']:07d}.safetensors")[0].summary
        assert summary["best_val_bleu"] == max(x["bleu"] for x in evals[: i + 1])
    best_so_far = max(e["bleu"] for e in evals)
    assert checkpoint.read_bundle(tmp_path / "last.safetensors")[0].summary["best_val_bleu"] == best_so_far


def test_a_stopped_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    straight = train(TrainConfig(out_dir=str(tmp_path / "a"), epochs=2, **TOY))
    stop = threading.Event()
    stop_after = lambda e: stop.set() if e.kind == "step" and e.step == 10 else None  # noqa: E731
    train(TrainConfig(out_dir=str(tmp_path / "b"), epochs=2, **TOY), progress=stop_after, stop=stop)
    assert checkpoint.read_bundle(tmp_path / "b" / "last.safetensors")[0].summary["steps"] == 10
    resumed = train(TrainConfig(out_dir=str(tmp_path / "b"), epochs=2, **TOY))
    a, _ = checkpoint.load(straight)
    b, _ = checkpoint.load(resumed)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.allclose(x, y, atol=1e-6), name


def test_a_killed_run_leaves_a_loadable_checkpoint_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "attnscope", "train", "--out", str(out), "--task", "sort", "--preset", "toy",
           "--epochs", "200", "--toy-size", "1000", "--threads", "1", "--max-tokens", "300"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not (out / "log.jsonl").exists() or len((out / "log.jsonl").read_text().splitlines()) < 2:
            assert proc.poll() is None, "training exited early"
            threading.Event().wait(0.2)
    finally:
        proc.kill()  # SIGKILL: no cleanup at all
        proc.wait()
    model, bundle = checkpoint.load(out / "last.safetensors")
    steps = bundle.summary["steps"]
    assert steps > 0
    train(parse_args(cmd[4:-8] + ["--task", "sort", "--preset", "toy", "--epochs", "3", "--toy-size", "1000",
                                  "--threads", "1", "--max-tokens", "300"]))
    assert checkpoint.read_bundle(out / "last.safetensors")[0].summary["steps"] > steps


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_distributed_training_on_cpu_with_gloo(tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}",
           "-m", "attnscope", "train", "--out", str(out), "--task", "copy", "--preset", "toy", "--epochs", "2",
           "--toy-size", "400", "--threads", "1", "--max-tokens", "300"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert result.returncode == 0, result.stderr[-2000:]
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2]  # written once, by rank 0
    checkpoint.load(out / "best.safetensors")


HISTORICAL_FLAGS = [  # every spelling runs in progress were started with; they must keep working
    "--out", "o", "--task", "sort", "--src", "fr", "--tgt", "en", "--data-dir", "d", "--vocab-size", "100",
    "--preset", "toy", "--set", "dropout=0.2", "--max-tokens", "10", "--epochs", "2", "--max-steps", "5",
    "--warmup", "3", "--seed", "4", "--threads", "1", "--eval-every", "7", "--bleu-sentences", "9",
    "--toy-size", "11", "--lr", "0.1", "--label-smoothing", "0.2", "--clip", "0.5", "--save-minutes", "1.5",
    "--precision", "bf16", "--device", "cpu", "--half", "--keep-evals", "--name", "n", "--init-from", "c.safetensors"]


def test_every_historical_flag_sets_its_field() -> None:
    assert parse_args(HISTORICAL_FLAGS) == TrainConfig(
        out_dir="o", task="sort", src_lang="fr", tgt_lang="en", data_dir="d", vocab_size=100, preset="toy",
        model={"dropout": 0.2}, max_tokens=10, epochs=2, max_steps=5, warmup=3, seed=4, threads=1, eval_every=7,
        bleu_sentences=9, toy_size=11, lr=0.1, label_smoothing=0.2, clip=0.5, save_minutes=1.5, precision="bf16",
        device="cpu", half=True, keep_evals=True, name="n", init_from="c.safetensors")
    assert parse_args(["--out", "x"]) == TrainConfig(out_dir="x")  # unset flags keep the defaults


def test_a_bad_flag_value_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--out", "x", "--task", "nope"])
    assert capsys.readouterr().err.splitlines()[-1].endswith("unknown task 'nope'; use multi30k or copy, reverse, sort")


def test_a_resume_file_written_before_trainstate_still_loads(tmp_path: Path) -> None:
    """Runs in progress saved their counters as a plain dict in JSON; TrainState reads them back."""
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(model.parameters())
    meta = {"step": 66, "epoch": 1, "batch": 1, "best_bleu": -1.0, "elapsed": 302.4,
            "history": [{"step": 40, "val_loss": 3.2, "bleu": 1.5}]}
    moments = {f"{n}::{k}": torch.full_like(p, 0.5) for n, p in model.named_parameters() for k in ("exp_avg", "exp_avg_sq")}
    save_file(moments, str(tmp_path / "old.safetensors"), metadata={"meta": json.dumps(meta)})
    state = load_training_state(tmp_path / "old.safetensors", optimizer, model)
    assert state == TrainState(**meta)
    assert torch.equal(optimizer.state[model.weight]["exp_avg"], torch.full((2, 2), 0.5))
    save_training_state(tmp_path / "new.safetensors", optimizer, model, state)
    assert load_training_state(tmp_path / "new.safetensors", torch.optim.Adam(model.parameters()), model) == state


def test_cli_overrides() -> None:
    cfg = parse_args(["--out", "x", "--set", "dropout=0.3", "--set", "positional=learned", "--epochs", "3",
                      "--init-from", "c.safetensors"])
    assert cfg.model == {"dropout": 0.3, "positional": "learned"} and cfg.epochs == 3 and cfg.init_from == "c.safetensors"


def test_a_run_started_from_a_checkpoint_may_raise_dropout_but_not_change_shapes(tmp_path: Path) -> None:
    first = train(TrainConfig(out_dir=str(tmp_path / "a"), epochs=1, **TOY))
    tuned = train(TrainConfig(out_dir=str(tmp_path / "b"), epochs=2, init_from=str(first),
                              model={"dropout": 0.3, "attention_dropout": 0.2}, **TOY))
    model, bundle = checkpoint.load(tuned)
    assert (bundle.config.dropout, bundle.config.attention_dropout) == (0.3, 0.2)
    assert bundle.config.d_model == checkpoint.load(first)[1].config.d_model
    with pytest.raises(ValueError, match="cannot change d_model"):
        train(TrainConfig(out_dir=str(tmp_path / "c"), epochs=2, init_from=str(first), model={"d_model": 64}, **TOY))
