"""Training loop shared by the CLI (`python -m attnscope train`), torchrun and the Train page.

Label-smoothed cross-entropy, Adam(0.9, 0.98, 1e-9) with warmup then inverse-sqrt decay
(section 5.3), gradient clipping, periodic validation loss and BLEU, best-checkpoint
keeping, resumable runs and atomic checkpoint writes.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
from tqdm import tqdm

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import Bundle
from attnscope.engine.analysis.bleu import scores
from attnscope.engine.decoding.translator import Translator
from attnscope.model.budget import model_refusal
from attnscope.model.config import PRESETS, ConfigError, ModelConfig
from attnscope.model.device import autocast, autocast_dtype, pick_device
from attnscope.model.transformer import Transformer
from attnscope.training.config import TrainConfig
from attnscope.training.corpus import build_corpus
from attnscope.training.data import collate, token_batches
from attnscope.training.evaluate import exact_match
from attnscope.training.loss import label_smoothed_loss, validation_loss
from attnscope.training.state import TrainState, load_training_state, save_training_state

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
    epoch: float  # epochs done, with the current one's share (16.93), as the checkpoint's summary says it
    total_steps: int
    loss: float
    lr: float
    elapsed: float  # training seconds, summed over resumes
    tokens_per_second: float  # over this session's training only (its tokens in its own time)
    val_loss: float | None = None
    bleu: float | None = None
    sample: tuple[str, str] | None = None  # (source, translation) of the first val sentence
    exact: float | None = None  # toy tasks: fraction of held-out sequences transformed exactly right
    checkpoint: str | None = None


def lr_at(step: int, peak: float, warmup: int) -> float:
    """Linear warmup to `peak`, then decay with the inverse square root of the step."""
    step = max(step, 1)
    return peak * min(step / warmup, math.sqrt(warmup / step))


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
        self.state = TrainState()

    # --- set-up -----------------------------------------------------------------------------
    def setup(self) -> None:
        """Model, data and optimizer: resumed from `last` in the run directory, started from
        `init_from`, or built fresh from the preset."""
        self._init_process()
        last, state_file = self.out / "last.safetensors", self.out / "last.state.safetensors"
        resume = last.is_file() and state_file.is_file()
        start = last if resume else (Path(self.cfg.init_from) if self.cfg.init_from else None)
        model, bundle = checkpoint.load(start, "cpu") if start is not None else (None, None)
        if bundle is not None and not resume and self.cfg.model:
            _, model = with_regularization(model, self.cfg.model)
        base = dict(PRESETS[self.cfg.preset], **self.cfg.model)
        max_len = model.config.max_len if model is not None else base.get("max_len", 256)
        self.corpus = build_corpus(self.cfg, None if bundle is None else (bundle.src_codec, bundle.tgt_codec), max_len)
        if model is None:
            fresh = self._fresh_config(base)
            refused = model_refusal(fresh.element_count(), "the model to train")  # decided before it is allocated
            if refused:
                raise ConfigError(refused)
            model = Transformer(fresh)
        self.config = model.config
        self.model = model.to(self.device).train()
        self.net = torch.nn.parallel.DistributedDataParallel(self.model) if self.world > 1 else self.model
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr, betas=(0.9, 0.98), eps=1e-9)
        if resume:
            self.state = load_training_state(state_file, self.optimizer, self.model)
        elif bundle is not None:  # continue the schedule where the earlier run stopped; "best" is this run's own
            self.state = TrainState(step=int(bundle.summary.get("steps", 0)), epoch=int(bundle.summary.get("epochs", 0)))

    def _init_process(self) -> None:
        """Threads, the process group under torchrun, and the seed."""
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        if self.world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if self.device.type == "cuda" else "gloo")
        torch.manual_seed(self.cfg.seed)

    def _fresh_config(self, base: dict[str, Any]) -> ModelConfig:
        """The preset with overrides, sized to the corpus's vocabularies (shared when the tokenizer is)."""
        src, tgt = self.corpus.bundle_codecs
        base.setdefault("share_embeddings", src.to_json() == tgt.to_json())
        return ModelConfig(src_vocab_size=src.vocab_size, tgt_vocab_size=tgt.vocab_size, **base)

    def epochs_done(self) -> float:
        """Whole epochs trained plus the share of the current one, to 2 decimals (the summary's and the events')."""
        return round(self.state.epoch + self.state.batch / max(self._n_batches, 1), 2)

    def bundle(self) -> Bundle:
        src, tgt = self.corpus.bundle_codecs
        summary = {"task": self.cfg.task, "data": "Multi30k task 1" if self.cfg.task == "multi30k" else f"toy {self.cfg.task}",
                   "train_sentences": len(self.corpus.train), "steps": self.state.step,
                   "epochs": self.epochs_done(),
                   "best_val_bleu": self.state.best_bleu, "name": self.cfg.run_name,
                   "training_seconds": round(self.state.elapsed),
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
        # every epoch's own count: shuffled buckets make them differ by a batch or two, so epochs x the first
        # epoch's count left a finished run short of (or past) its total
        total = self._total = cfg.max_steps or sum(len(self.epoch_batches(e)) for e in range(cfg.epochs))
        log = (self.out / "log.jsonl").open("a") if self.rank == 0 else None
        # the console shows progress only when no caller follows it (the app's jobs do, and the server's log stays clean)
        quiet = self.rank != 0 or self.progress is not None
        bar = tqdm(total=total, initial=st.step, disable=True if quiet else None, unit="step")
        started, last_save, tokens = time.perf_counter() - st.elapsed, time.perf_counter(), 0
        self._session_started = time.perf_counter()  # `tokens` counts this session's only: the rate's clock
        loss_avg: float | None = None
        self._validated_at = -1
        best_path = self.out / "best.safetensors"
        while st.step < total and st.epoch < cfg.epochs and not self._stopping():
            batches = self.epoch_batches(st.epoch)
            self._n_batches = len(batches)  # this epoch's: the share of it done (epochs_done) counts against it
            for idx in batches[st.batch:]:
                if st.step >= total or self._stopping():
                    break
                loss = self.train_step(idx)
                n_tok = sum(len(self.corpus.train[i].tgt) - 1 for i in idx)
                tokens += n_tok
                loss_avg = loss if loss_avg is None else 0.98 * loss_avg + 0.02 * loss
                st.step += 1
                st.batch += 1
                st.elapsed = time.perf_counter() - started
                bar.update(1)
                bar.set_postfix(loss=f"{loss_avg:.3f}", epoch=st.epoch)
                self._emit("step", loss_avg, tokens)
                if cfg.eval_every and st.step % cfg.eval_every == 0:
                    self._validate(loss_avg, tokens, log, best_path)
                elif self.rank == 0 and time.perf_counter() - last_save > cfg.save_minutes * 60:
                    self._save("last")
                    last_save = time.perf_counter()
            else:
                st.epoch += 1
                st.batch = 0
                if not cfg.eval_every:
                    self._validate(loss_avg, tokens, log, best_path)
        loss_avg = loss_avg if loss_avg is not None else float("nan")
        # the same decision on every rank: they share the validation history
        if self._validated_at != st.step and not self.out_of_patience():
            self._validate(loss_avg, tokens, log, best_path)
        bar.close()
        if log:
            log.close()
        self._emit("done", loss_avg, tokens, checkpoint=str(best_path))
        self.net = self.model  # the DDP wrapper's reducer holds the process group: let it go with the run
        return best_path

    def out_of_patience(self) -> bool:
        """Early stopping: `patience` validations in a row found no better val BLEU than the best."""
        return self.cfg.patience is not None and self.state.validations_since_best() >= self.cfg.patience

    def _stopping(self) -> bool:
        return self.stop.is_set() or self.out_of_patience()

    def train_step(self, idx: list[int]) -> float:
        batch = collate([self.corpus.train[i] for i in idx], self.model.config.pad_id).to(self.device)
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(self.state.step + 1, self.cfg.lr, self.cfg.warmup)
        with autocast(self.device, self.dtype):
            logits = self.net(batch.src, batch.tgt_in)
        loss, n = label_smoothed_loss(logits, batch.tgt_out, self.cfg.label_smoothing, batch.pad_id)
        self.optimizer.zero_grad(set_to_none=True)
        (loss / n).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
        self.optimizer.step()
        return float(loss.detach()) / n

    def _validate(self, loss: float, tokens: int, log: Any, best_path: Path) -> None:
        st = self.state
        self._validated_at = st.step
        if self.rank == 0:
            val_loss, bleu, exact, sample = self._evaluate()
            st.history.append({"step": st.step, "val_loss": round(val_loss, 4), "bleu": bleu})
            improved = bleu > st.best_bleu
            st.best_bleu = max(bleu, st.best_bleu)  # before saving: every file of this validation knows it
            path = self._save("last")
            if self.cfg.keep_evals:
                self._save(f"eval-{st.step:07d}")
            if improved:
                path = self._save("best")
            record = {"kind": "eval", "step": st.step, "epoch": st.epoch, "loss": round(loss, 4),
                      "val_loss": round(val_loss, 4), "bleu": bleu, "elapsed": round(st.elapsed, 1),
                      "sample": sample[1]} | ({} if exact is None else {"exact": exact})
            log.write(json.dumps(record) + "\n")
            log.flush()
            if self.progress is None:
                tqdm.write(json.dumps(record))
            self._emit("eval", loss, tokens, val_loss=val_loss, bleu=bleu, exact=exact, sample=sample, checkpoint=str(path))
        if self.world > 1:  # every rank needs the history to make the same early-stopping decision
            shared = [st.history]
            dist.broadcast_object_list(shared, src=0)
            st.history = shared[0]

    def _emit(self, kind: str, loss: float, tokens: int, **extra: Any) -> None:
        if self.progress is None or self.rank != 0:
            return
        st, cfg = self.state, self.cfg
        session = max(time.perf_counter() - self._session_started, 1e-9)
        self.progress(TrainEvent(kind, st.step, self.epochs_done(), self._total, loss,
                                 lr_at(st.step, cfg.lr, cfg.warmup), st.elapsed, tokens / session, **extra))


def train(cfg: TrainConfig, progress: Callable[[TrainEvent], None] | None = None,
          stop: threading.Event | None = None) -> Path:
    """Train (or resume) a model as `cfg` says; returns the best checkpoint's path."""
    return Trainer(cfg, progress, stop).run()
