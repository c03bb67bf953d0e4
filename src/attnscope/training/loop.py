"""Training loop shared by the CLI (`python -m attnscope train`), torchrun and the Train page.

Label-smoothed cross-entropy, Adam(0.9, 0.98, 1e-9) with warmup then inverse-sqrt decay
(section 5.3), gradient clipping, periodic validation loss and BLEU, best-checkpoint
keeping, resumable runs and atomic checkpoint writes.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm import tqdm

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import Bundle, atomic_write
from attnscope.engine.bleu import scores
from attnscope.engine.translator import Translator
from attnscope.model.config import PAD_ID, PRESETS, ModelConfig
from attnscope.model.device import autocast, autocast_dtype, pick_device
from attnscope.model.tokenization import TextCodec, train_bpe, train_word_level
from attnscope.model.transformer import Transformer
from attnscope.training.data import TOY_TASKS, Example, collate, data_dir, load_pairs, make_example, token_batches, toy_split
from attnscope.training.evaluate import exact_match


@dataclass(frozen=True)
class TrainConfig:
    """What to train on, how big, how long, and where to write."""

    out_dir: str
    task: str = "multi30k"  # or a toy task: copy / reverse / sort
    src_lang: str = "en"
    tgt_lang: str = "de"
    data_dir: str | None = None  # Multi30k directory; default $ATTNSCOPE_DATA
    vocab_size: int = 8000  # joint BPE vocabulary
    preset: str = "small"
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig overrides
    max_tokens: int = 4000  # padded tokens per batch (per process under torchrun)
    epochs: int = 20
    max_steps: int | None = None
    lr: float = 1e-3  # peak learning rate, reached after `warmup` steps
    warmup: int = 1000
    label_smoothing: float = 0.1
    clip: float = 1.0
    seed: int = 1
    precision: str = "auto"  # auto / fp32 / bf16
    device: str = "auto"
    threads: int | None = None
    eval_every: int | None = None  # steps between validations; default once per epoch
    save_minutes: float = 10.0  # also save `last` this often, so a killed run loses little
    bleu_sentences: int | None = None  # validate BLEU on the first N val sentences (None = all)
    toy_size: int = 5000  # training pairs for toy tasks
    half: bool = False  # store checkpoints in fp16
    keep_evals: bool = False  # also keep eval-<step>.safetensors at every validation (for averaging)
    name: str | None = None  # checkpoint name shown in the app; default e.g. multi30k-en-de
    init_from: str | None = None  # start from this checkpoint's weights, tokenizers and step count (fresh optimizer)

    def __post_init__(self) -> None:
        if self.task != "multi30k" and self.task not in TOY_TASKS:
            raise ValueError(f"unknown task {self.task!r}; use multi30k or {', '.join(TOY_TASKS)}")
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose {', '.join(PRESETS)}")

    @property
    def run_name(self) -> str:
        pair = f"{self.src_lang}-{self.tgt_lang}"
        return self.name or (f"multi30k-{pair}" if self.task == "multi30k" else f"toy-{self.task}")


# Fields a run started from a checkpoint may change: they alter training, not the shapes of the weights.
REGULARIZATION_FIELDS = ("dropout", "attention_dropout")


def with_regularization(model: Transformer, overrides: dict[str, Any]) -> tuple[ModelConfig, Transformer]:
    """The same weights under new dropout rates, e.g. to fine-tune a shipped model with more dropout."""
    refused = sorted(set(overrides) - set(REGULARIZATION_FIELDS))
    if refused:
        raise ValueError(f"cannot change {', '.join(refused)} when starting from a checkpoint; "
                         f"only {' and '.join(REGULARIZATION_FIELDS)} may be set")
    config = dataclasses.replace(model.config, **overrides)
    rebuilt = Transformer(config)
    rebuilt.load_state_dict(model.state_dict())
    return config, rebuilt


@dataclass(frozen=True)
class TrainEvent:
    """What a progress callback receives: after each step, each validation and at the end."""

    kind: str  # "step" | "eval" | "done"
    step: int
    epoch: int
    total_steps: int
    loss: float
    lr: float
    elapsed: float
    tokens_per_second: float
    val_loss: float | None = None
    bleu: float | None = None
    sample: tuple[str, str] | None = None  # (source, translation) of the first val sentence
    exact: float | None = None  # toy tasks: fraction of held-out sequences transformed exactly right
    checkpoint: str | None = None


@dataclass
class Corpus:
    bundle_codecs: tuple[TextCodec, TextCodec]
    train: list[Example]
    val: list[Example]
    val_text: list[tuple[str, str]]


def lr_at(step: int, peak: float, warmup: int) -> float:
    """Linear warmup to `peak`, then decay with the inverse square root of the step."""
    step = max(step, 1)
    return peak * min(step / warmup, math.sqrt(warmup / step))


def build_corpus(cfg: TrainConfig, codecs: tuple[TextCodec, TextCodec] | None, max_len: int) -> Corpus:
    """Read (or generate) the data and encode it, training the tokenizer unless given one."""
    if cfg.task == "multi30k":
        directory = data_dir(cfg.data_dir)
        train_text = load_pairs(directory, "train", cfg.src_lang, cfg.tgt_lang)
        val_text = load_pairs(directory, "val", cfg.src_lang, cfg.tgt_lang)
    else:
        train_text, val_text = toy_split(cfg.task, cfg.toy_size, 200, cfg.seed)
    if codecs is None:
        texts = [s for s, _ in train_text] + [t for _, t in train_text]
        tok = train_bpe(texts, cfg.vocab_size) if cfg.task == "multi30k" else train_word_level(texts)
        codecs = (TextCodec(tok), TextCodec(tok))
    src, tgt = codecs

    def encode(pairs: list[tuple[str, str]]) -> list[Example]:
        return [make_example(src.encode(s), tgt.encode(t), max_len) for s, t in pairs]
    return Corpus(codecs, encode(train_text), encode(val_text), val_text)


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> tuple[torch.Tensor, int]:
    """Summed smoothed cross-entropy over non-pad targets, and their count."""
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1),
                           ignore_index=PAD_ID, label_smoothing=smoothing, reduction="sum")
    return loss, int((target != PAD_ID).sum())


@torch.no_grad()
def validation_loss(model: Transformer, examples: list[Example], device: torch.device) -> float:
    model.eval()
    total, count = 0.0, 0
    for idx in token_batches(examples, 8000, shuffle=False):
        batch = collate([examples[i] for i in idx]).to(device)
        loss, n = label_smoothed_loss(model(batch.src, batch.tgt_in), batch.tgt_out, 0.0)
        total, count = total + float(loss), count + n
    model.train()
    return total / max(count, 1)


def save_training_state(path: Path, optimizer: torch.optim.Optimizer, model: Transformer, meta: dict[str, Any]) -> None:
    """Adam moments by parameter name plus loop counters, in safetensors (no pickle)."""
    names = {id(p): n for n, p in checkpoint.unique_state_params(model).items()}
    tensors = {}
    for p, state in optimizer.state.items():
        for key in ("exp_avg", "exp_avg_sq"):
            tensors[f"{names[id(p)]}::{key}"] = state[key].detach().cpu().contiguous()
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={"meta": json.dumps(meta)}))


def load_training_state(path: Path, optimizer: torch.optim.Optimizer, model: Transformer) -> dict[str, Any]:
    params = checkpoint.unique_state_params(model)
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads(f.metadata()["meta"])
        for name, p in params.items():
            if f"{name}::exp_avg" in f.keys():
                optimizer.state[p] = {"step": torch.tensor(float(meta["step"])),
                                      "exp_avg": f.get_tensor(f"{name}::exp_avg").to(p.device),
                                      "exp_avg_sq": f.get_tensor(f"{name}::exp_avg_sq").to(p.device)}
    return meta


class Trainer:
    """One training run; `run()` returns the path of the best checkpoint."""

    def __init__(self, cfg: TrainConfig, progress: Callable[[TrainEvent], None] | None = None,
                 stop: threading.Event | None = None) -> None:
        self.cfg, self.progress, self.stop = cfg, progress, stop or threading.Event()
        self.out = Path(cfg.out_dir)
        self.rank = int(os.environ.get("RANK", 0))
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        self.device = pick_device(cfg.device)
        if self.world > 1 and self.device.type == "cuda":
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        self.dtype = autocast_dtype(self.device, cfg.precision)  # type: ignore[arg-type]

    # --- set-up -----------------------------------------------------------------------------
    def setup(self) -> None:
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        if self.world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
        torch.manual_seed(self.cfg.seed)
        last = self.out / "last.safetensors"
        resume = last.is_file() and (self.out / "last.state.safetensors").is_file()
        start = last if resume else (Path(self.cfg.init_from) if self.cfg.init_from else None)
        if start is not None:
            model, bundle = checkpoint.load(start, "cpu")
            self.config, codecs = bundle.config, (bundle.src_codec, bundle.tgt_codec)
            if not resume and self.cfg.model:
                self.config, model = with_regularization(model, self.cfg.model)
        else:
            base = dict(PRESETS[self.cfg.preset], **self.cfg.model)
            self.config, codecs, model = None, None, None  # type: ignore[assignment]
        max_len = self.config.max_len if start is not None else base.get("max_len", 256)
        self.corpus = build_corpus(self.cfg, codecs, max_len)
        if start is None:
            src, tgt = self.corpus.bundle_codecs
            joint = src.to_json() == tgt.to_json()
            base.setdefault("share_embeddings", joint)
            self.config = ModelConfig(src_vocab_size=src.vocab_size, tgt_vocab_size=tgt.vocab_size, **base)
            model = Transformer(self.config)
        self.model = model.to(self.device).train()
        self.net = torch.nn.parallel.DistributedDataParallel(self.model) if self.world > 1 else self.model
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr, betas=(0.9, 0.98), eps=1e-9)
        self.state = {"step": 0, "epoch": 0, "batch": 0, "best_bleu": -1.0, "elapsed": 0.0, "history": []}
        if resume:
            self.state.update(load_training_state(self.out / "last.state.safetensors", self.optimizer, self.model))
        elif start is not None:  # continue the schedule where the earlier run stopped; "best" is this run's own
            self.state.update(step=int(bundle.summary.get("steps", 0)), epoch=int(bundle.summary.get("epochs", 0)))

    def bundle(self) -> Bundle:
        src, tgt = self.corpus.bundle_codecs
        summary = {"task": self.cfg.task, "data": "Multi30k task 1" if self.cfg.task == "multi30k" else f"toy {self.cfg.task}",
                   "train_sentences": len(self.corpus.train), "steps": self.state["step"],
                   "epochs": round(self.state["epoch"] + self.state["batch"] / max(self._n_batches, 1), 2),
                   "best_val_bleu": self.state["best_bleu"], "name": self.cfg.run_name,
                   "training_seconds": round(self.state["elapsed"]),
                   "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   "train_config": dataclasses.asdict(self.cfg)}
        return Bundle(self.config, src, tgt, self.cfg.src_lang, self.cfg.tgt_lang, summary)

    # --- checkpoints ------------------------------------------------------------------------
    def _save(self, name: str) -> Path:
        path = checkpoint.save(self.model, self.bundle(), self.out / f"{name}.safetensors", half=self.cfg.half)
        if name == "last":
            save_training_state(self.out / "last.state.safetensors", self.optimizer, self.model, self.state)
        return path

    # --- evaluation -------------------------------------------------------------------------
    def _evaluate(self) -> tuple[float, float, float | None, tuple[str, str]]:
        val_loss = validation_loss(self.model, self.corpus.val, self.device)
        pairs = self.corpus.val_text[: self.cfg.bleu_sentences]
        translator = Translator(self.model, self.bundle(), self.device)
        hyps = translator.translate_batch([s for s, _ in pairs])
        refs = [t for _, t in pairs]
        exact = None if self.cfg.task == "multi30k" else exact_match(hyps, refs)
        return val_loss, scores(hyps, refs)["bleu"], exact, (pairs[0][0], hyps[0])

    # --- the loop ---------------------------------------------------------------------------
    def epoch_batches(self, epoch: int) -> list[list[int]]:
        batches = token_batches(self.corpus.train, self.cfg.max_tokens, shuffle=True, seed=self.cfg.seed + epoch)
        usable = len(batches) // self.world * self.world
        return batches[self.rank:usable:self.world]

    def run(self) -> Path:
        self.setup()
        cfg, st = self.cfg, self.state
        self.out.mkdir(parents=True, exist_ok=True)
        self._n_batches = len(self.epoch_batches(0))
        total = cfg.max_steps or cfg.epochs * self._n_batches
        log = (self.out / "log.jsonl").open("a") if self.rank == 0 else None
        bar = tqdm(total=total, initial=st["step"], disable=True if self.rank != 0 else None, unit="step")
        started, last_save, tokens = time.perf_counter() - st["elapsed"], time.perf_counter(), 0
        loss_avg: float | None = None
        self._validated_at = -1
        best_path = self.out / "best.safetensors"
        while st["step"] < total and st["epoch"] < cfg.epochs and not self.stop.is_set():
            batches = self.epoch_batches(st["epoch"])
            for idx in batches[st["batch"]:]:
                if st["step"] >= total or self.stop.is_set():
                    break
                loss = self.train_step(idx)
                n_tok = sum(len(self.corpus.train[i].tgt) - 1 for i in idx)
                tokens += n_tok
                loss_avg = loss if loss_avg is None else 0.98 * loss_avg + 0.02 * loss
                st["step"] += 1
                st["batch"] += 1
                st["elapsed"] = time.perf_counter() - started
                bar.update(1)
                bar.set_postfix(loss=f"{loss_avg:.3f}", epoch=st["epoch"])
                self._emit("step", loss_avg, tokens)
                if cfg.eval_every and st["step"] % cfg.eval_every == 0:
                    self._validate(loss_avg, tokens, log, best_path)
                elif self.rank == 0 and time.perf_counter() - last_save > cfg.save_minutes * 60:
                    self._save("last")
                    last_save = time.perf_counter()
            else:
                st["epoch"] += 1
                st["batch"] = 0
                if not cfg.eval_every:
                    self._validate(loss_avg, tokens, log, best_path)
        loss_avg = loss_avg if loss_avg is not None else float("nan")
        if self._validated_at != st["step"]:  # the same decision on every rank (they meet at a barrier)
            self._validate(loss_avg, tokens, log, best_path)
        bar.close()
        if log:
            log.close()
        self._emit("done", loss_avg, tokens, checkpoint=str(best_path))
        return best_path

    def train_step(self, idx: list[int]) -> float:
        batch = collate([self.corpus.train[i] for i in idx]).to(self.device)
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(self.state["step"] + 1, self.cfg.lr, self.cfg.warmup)
        with autocast(self.device, self.dtype):
            logits = self.net(batch.src, batch.tgt_in)
        loss, n = label_smoothed_loss(logits, batch.tgt_out, self.cfg.label_smoothing)
        self.optimizer.zero_grad(set_to_none=True)
        (loss / n).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
        self.optimizer.step()
        return float(loss.detach()) / n

    def _validate(self, loss: float, tokens: int, log: Any, best_path: Path) -> None:
        st = self.state
        self._validated_at = st["step"]
        if self.rank == 0:
            val_loss, bleu, exact, sample = self._evaluate()
            st["history"].append({"step": st["step"], "val_loss": round(val_loss, 4), "bleu": bleu})
            improved = bleu > st["best_bleu"]
            st["best_bleu"] = max(bleu, st["best_bleu"])  # before saving: every file of this validation knows it
            path = self._save("last")
            if self.cfg.keep_evals:
                self._save(f"eval-{st['step']:07d}")
            if improved:
                path = self._save("best")
            record = {"kind": "eval", "step": st["step"], "epoch": st["epoch"], "loss": round(loss, 4),
                      "val_loss": round(val_loss, 4), "bleu": bleu, "elapsed": round(st["elapsed"], 1),
                      "sample": sample[1]} | ({} if exact is None else {"exact": exact})
            log.write(json.dumps(record) + "\n")
            log.flush()
            tqdm.write(json.dumps(record))
            self._emit("eval", loss, tokens, val_loss=val_loss, bleu=bleu, exact=exact, sample=sample, checkpoint=str(path))
        if self.world > 1:
            dist.barrier()

    def _emit(self, kind: str, loss: float, tokens: int, **extra: Any) -> None:
        if self.progress is None or self.rank != 0:
            return
        st, cfg = self.state, self.cfg
        total = cfg.max_steps or cfg.epochs * self._n_batches
        elapsed = max(st["elapsed"], 1e-9)
        self.progress(TrainEvent(kind, st["step"], st["epoch"], total, loss,
                                 lr_at(st["step"], cfg.lr, cfg.warmup), elapsed, tokens / elapsed, **extra))


def train(cfg: TrainConfig, progress: Callable[[TrainEvent], None] | None = None,
          stop: threading.Event | None = None) -> Path:
    """Train (or resume) a model as `cfg` says; returns the best checkpoint's path."""
    return Trainer(cfg, progress, stop).run()


def parse_args(argv: Sequence[str] | None = None) -> TrainConfig:
    p = argparse.ArgumentParser(prog="python -m attnscope train", description=__doc__)
    p.add_argument("--out", required=True, help="run directory (checkpoints, log.jsonl); resumes if it has one")
    p.add_argument("--task", default="multi30k")
    p.add_argument("--src", default="en")
    p.add_argument("--tgt", default="de")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--preset", default="small", choices=sorted(PRESETS))
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a ModelConfig field, e.g. --set dropout=0.3 --set positional=learned")
    for name in ("max_tokens", "epochs", "max_steps", "warmup", "seed", "threads", "eval_every", "bleu_sentences", "toy_size"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None)
    for name in ("lr", "label_smoothing", "clip", "save_minutes"):
        p.add_argument("--" + name.replace("_", "-"), type=float, default=None)
    p.add_argument("--precision", default=None, choices=["auto", "fp32", "bf16"])
    p.add_argument("--device", default=None)
    p.add_argument("--half", action="store_true", help="store checkpoints in fp16")
    p.add_argument("--keep-evals", action="store_true", help="keep a checkpoint of every validation")
    p.add_argument("--name", default=None)
    p.add_argument("--init-from", default=None, help="start from a checkpoint (e.g. a shipped one) with a fresh optimizer")
    a = p.parse_args(argv)
    overrides = {}
    for item in a.set:
        key, _, value = item.partition("=")
        overrides[key] = json.loads(value) if value[:1].isdigit() or value in ("true", "false") else value
    given = {k: v for k, v in vars(a).items() if v is not None and k not in ("out", "src", "tgt", "set", "vocab_size", "data_dir", "half", "keep_evals", "init_from")}
    return TrainConfig(out_dir=a.out, src_lang=a.src, tgt_lang=a.tgt, data_dir=a.data_dir, vocab_size=a.vocab_size,
                       model=overrides, half=a.half, keep_evals=a.keep_evals, init_from=a.init_from, **given)


def main(argv: Sequence[str] | None = None) -> None:
    train(parse_args(argv))
    if dist.is_initialized():
        dist.destroy_process_group()
