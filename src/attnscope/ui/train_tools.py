"""Widgets of the Train page: the run form, the Start/Resume/Stop controls, live progress and snapshots."""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import streamlit as st

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.registry import safe_name, user_dir
from attnscope.model.config import PRESETS
from attnscope.model.device import autocast_dtype, pick_device
from attnscope.training.config import TrainConfig
from attnscope.training.data import LANGUAGES, TOY_TASKS, DataError, corpus_file, data_dir
from attnscope.training.jobs import Ending, TrainJob, estimate_epoch_seconds, existing_run, free_name
from attnscope.training.toy import TOY_MODEL, TOY_SCHEDULE
from attnscope.ui import state, tables, widgets
from attnscope.ui.persist import keep
from attnscope.ui.text import plain
from attnscope.viz.heatmap import record_heatmap
from attnscope.viz.training import learning_curves

MAX_EPOCHS = 200
TOY, MULTI30K = "Toy task", "Multi30k"
MULTI30K_SCHEDULE: dict[str, Any] = dict(epochs=20, max_tokens=4000, lr=1e-3, warmup=1000, eval_every=0)
# Form fields whose defaults depend on the data source and model size: reset when those change.
MODEL_KEYS = {"train_d_model": "d_model", "train_heads": "n_heads", "train_enc": "n_encoder_layers",
              "train_dec": "n_decoder_layers", "train_ff": "d_ff", "train_dropout": "dropout", "train_norm": "norm"}
SCHEDULE_KEYS = {"train_epochs": "epochs", "train_tokens": "max_tokens", "train_lr": "lr", "train_warmup": "warmup",
                 "train_eval_every": "eval_every"}


@st.cache_resource
def jobs() -> dict[str, TrainJob]:
    """Every job started in this server process, by id (each session remembers its own)."""
    return {}


_JOBS_LOCK = threading.Lock()


def runs_dir() -> Path:
    return user_dir() / "runs"


def current_job() -> TrainJob | None:
    """This session's latest job, if any."""
    return jobs().get(state.stored(state.TRAIN_JOB, ""))


def multi30k_available(src: str, tgt: str) -> str | None:
    """None if the training and validation files exist, else the message saying what is missing."""
    try:
        for split in ("train", "val"):
            for lang in (src, tgt):
                corpus_file(data_dir(), split, lang)
    except DataError as err:
        return str(err)
    return None


def form_defaults(source: str, preset: str) -> dict[str, Any]:
    """Default values of the model and schedule fields for a data source and model size."""
    toy = source == TOY
    model = dict(PRESETS[preset], **(TOY_MODEL if toy and preset == "toy" else {}))
    schedule = dict(TOY_SCHEDULE if toy else MULTI30K_SCHEDULE)
    values = {key: model.get(name, {"dropout": 0.1, "norm": "post"}.get(name)) for key, name in MODEL_KEYS.items()}
    values |= {key: schedule[name] or 0 for key, name in SCHEDULE_KEYS.items()}
    values["train_patience"] = 0
    values["train_dropout"] = float(values["train_dropout"])
    values["train_lr"] = float(values["train_lr"])
    return values


def _reset_when_changed(marker: str, value: object, defaults: dict[str, Any]) -> None:
    """Put fields back to their defaults when `value` (e.g. the data source) differs from last time."""
    if state.stored(marker) != value:
        state.store(marker, value)
        for key, default in defaults.items():
            state.store(key, default)


def _number(column: Any, label: str, low: float, high: float, key: str, defaults: dict[str, Any], **kwargs: Any) -> Any:
    """A number input whose value survives leaving the page, starting at `defaults[key]`."""
    return column.number_input(label, low, high, **kwargs, **keep(key, defaults[key]))


def run_form() -> tuple[TrainConfig | None, str]:
    """The settings of a run (None while they are incomplete) and the sample sentence to watch.

    Every value survives leaving the page; model and schedule fields follow the data source and
    model size, and the run name follows the task until the user types a name of their own."""
    device = pick_device()
    dtype = autocast_dtype(device)
    st.info(f"Training runs on **{device.type.upper()}**" + (" with bf16 autocast." if dtype else " in fp32."))
    cols = st.columns(3)
    source = cols[0].radio("Data", [TOY, MULTI30K], horizontal=True, **keep("train_data", TOY))
    missing = None
    if source == TOY:
        task = cols[1].selectbox("Task", TOY_TASKS, **keep("train_task", "reverse"))
        src = tgt = "en"
        suggested = f"toy-{task}"
    else:
        task = "multi30k"
        src = cols[1].selectbox("Source language", LANGUAGES, **keep("train_src", "en"))
        targets = [lang for lang in LANGUAGES if lang != src]
        if state.stored(state.TRAIN_TARGET) not in targets:
            state.store(state.TRAIN_TARGET, targets[0])
        tgt = cols[2].selectbox("Target language", targets, **keep(state.TRAIN_TARGET, targets[0]))
        suggested = f"my-{src}-{tgt}"
        missing = multi30k_available(src, tgt)
    _reset_when_changed(state.TRAIN_SOURCE_WAS, source, {"train_preset": "toy" if source == TOY else "small"})
    preset = st.selectbox("Model size", list(PRESETS), **keep("train_preset", "toy"))
    defaults = form_defaults(source, preset)
    _reset_when_changed(state.TRAIN_PROFILE_WAS, (source, preset), defaults)
    overrides: dict[str, Any] = dict(TOY_MODEL) if source == TOY and preset == "toy" else {}  # the form's fields on top
    with st.expander("Expert settings (ModelConfig fields)"):
        c = st.columns(4)
        overrides["d_model"] = _number(c[0], "d_model", 8, 1024, "train_d_model", defaults, step=8)
        overrides["n_heads"] = _number(c[1], "heads", 1, 16, "train_heads", defaults)
        overrides["n_encoder_layers"] = _number(c[2], "encoder layers", 1, 12, "train_enc", defaults)
        overrides["n_decoder_layers"] = _number(c[3], "decoder layers", 1, 12, "train_dec", defaults)
        overrides["d_ff"] = _number(c[0], "d_ff", 8, 4096, "train_ff", defaults, step=8)
        overrides["dropout"] = _number(c[1], "dropout", 0.0, 0.9, "train_dropout", defaults, step=0.05)
        overrides["positional"] = c[2].selectbox("positional", ["sinusoidal", "learned"], **keep("train_pos", "sinusoidal"))
        overrides["norm"] = c[3].selectbox("norm", ["post", "pre"], **keep("train_norm", defaults["train_norm"]))
    c = st.columns(6)
    epochs = _number(c[0], f"Epochs (max {MAX_EPOCHS})", 1, MAX_EPOCHS, "train_epochs", defaults)
    max_tokens = _number(c[1], "Batch size (padded tokens)", 100, 20_000, "train_tokens", defaults, step=100)
    lr = _number(c[2], "Peak learning rate", 1e-5, 1e-2, "train_lr", defaults, format="%.5f")
    warmup = _number(c[3], "Warm-up steps", 1, 10_000, "train_warmup", defaults)
    eval_every = _number(c[4], "Validate every (steps; 0 = each epoch)", 0, 100_000, "train_eval_every", defaults)
    patience = _number(c[5], "Stop early after (validations without better BLEU; 0 = never)", 0, 1000,
                       "train_patience", defaults)
    if state.stored(state.TRAIN_NAME) in (None, state.stored(state.TRAIN_SUGGESTED)):
        state.store(state.TRAIN_NAME, suggested)  # the name follows the task until the user types their own
    state.store(state.TRAIN_SUGGESTED, suggested)
    name = st.text_input("Run name", max_chars=60, **keep(state.TRAIN_NAME, suggested))
    sample_default = "a b c d e f" if source == TOY else "Two dogs are running through the snow."
    _reset_when_changed("_train_sample_source", source, {"train_sample": sample_default})
    sample = st.text_input("Sample sentence to watch", max_chars=300, **keep("train_sample", sample_default))
    if missing:
        st.warning(plain(missing))
        return None, sample
    try:
        safe = safe_name(name)
        toy_only = TOY_SCHEDULE if source == TOY else {}
        config = TrainConfig(out_dir=str(runs_dir() / safe), task=task, src_lang=src, tgt_lang=tgt,
                             data_dir=str(data_dir()), preset=preset, model=overrides, epochs=int(epochs),
                             max_tokens=int(max_tokens), lr=float(lr), warmup=int(warmup), name=safe,
                             eval_every=int(eval_every) or None, patience=int(patience) or None,
                             bleu_sentences=200 if task == "multi30k" else None, save_minutes=2.0,
                             toy_size=toy_only.get("toy_size", 5000),
                             label_smoothing=toy_only.get("label_smoothing", 0.1), threads=toy_only.get("threads"))
    except (ValueError, CheckpointError) as err:
        st.error(plain(err))
        return None, sample
    return config, sample


def controls(config: TrainConfig | None, sample: str) -> None:
    """Estimate, Start new, Resume and Stop: always shown, enabled when they apply, with what each will do."""
    job = current_job()
    running = job is not None and not job.done
    found = existing_run(Path(config.out_dir)) if config is not None else None
    fresh = free_name(runs_dir(), config.run_name) if config is not None else None
    if running:
        st.info(f"Training **{plain(job.config.run_name)}**: Stop keeps what it has learned so far.")
    elif config is not None and found is not None:
        st.info(f"A run named **{plain(config.run_name)}** exists (step {found.get('steps', '?')}, epoch "
                f"{found.get('epochs', '?')}). **Resume** continues it; **Start new** trains from scratch "
                f"as **{plain(fresh)}**.")
    elif config is not None:
        st.caption(f"Start new trains from scratch and saves the model as {plain(config.run_name)}.")
    cols = st.columns(4)
    if cols[0].button("Estimate time per epoch", key="train_estimate", disabled=config is None or running):
        estimate(config)
    if cols[1].button("Start new", type="primary", key="train_start", disabled=config is None or running):
        launch(dataclasses.replace(config, out_dir=str(runs_dir() / fresh), name=fresh), sample, resume=False)
    if cols[2].button("Resume", key="train_resume", disabled=found is None or running):
        launch(config, sample, resume=True)
    if cols[3].button("Stop", key="train_stop", disabled=not running):
        job.stop()


def launch(config: TrainConfig, sample: str, resume: bool) -> None:
    job = TrainJob(config, sample, user_dir(), resume=resume)
    try:
        job.start()
    except ValueError as err:
        st.error(plain(err))
        return
    with _JOBS_LOCK:
        jobs()[job.id] = job
    state.store(state.TRAIN_JOB, job.id)
    st.rerun()


def estimate(config: TrainConfig) -> None:
    with st.spinner("Timing a few training steps…"):
        try:
            seconds, n_batches = estimate_epoch_seconds(config)
        except (DataError, ValueError) as err:
            st.error(plain(err))
            return
    st.info(f"About {seconds:.0f} s per epoch ({n_batches} batches), so {config.epochs} epochs ≈ "
            f"{seconds * config.epochs / 60:.1f} min on this machine.")


def status_line(job: TrainJob) -> str:
    last = job.last
    if last is None:
        return f"{job.status}: preparing data and model…"
    exact = next((v.exact for v in reversed(job.validations()) if v.exact is not None), None)
    eta = job.eta_seconds()
    return (f"{job.status}: step {last.step}/{last.total_steps}, epoch {last.epoch}, loss {last.loss:.3f}, "
            f"{last.tokens_per_second:.0f} tokens/s"
            + (f", held-out exact: {100 * exact:.1f}%" if exact is not None else "")
            + (f", about {eta / 60:.1f} min left" if eta is not None else ""))


def ending(job: TrainJob) -> str | None:
    """Why a run ended, in one sentence; None while it runs (and for a failed run, whose error says it)."""
    at = f"step {job.last.step}" if job.last else "step 0"
    patience = job.config.patience
    return {
        Ending.STOPPED_BY_USER: f"Stopped by you at {at}; Resume continues from there.",
        Ending.OUT_OF_PATIENCE: f"Finished early at {at}: {patience} validations in a row found no better BLEU "
                                "(early stopping), so the model saved is the best one seen.",
        Ending.MAX_STEPS: f"Finished: the run reached its step limit ({job.config.max_steps} steps).",
        Ending.ALL_EPOCHS: f"Finished: the run trained all its epochs ({job.config.epochs}, {at}).",
    }.get(job.ended_by)


def saved_note(job: TrainJob) -> str:
    """Which model the finished run published: the one of its best validation, read from the file itself."""
    try:
        summary = checkpoint.read_bundle(job.published)[0].summary
    except CheckpointError as err:
        return f"Saved as {job.published.stem}, but it cannot be read back: {plain(err)}"
    saved, last = summary.get("steps"), job.last.step if job.last else None
    when = "its last step" if saved == last or last is None else f"step {saved} (the run went on to step {last})"
    return (f"Saved as {job.published.stem}: the model of the best validation (val BLEU {summary.get('best_val_bleu')}), "
            f"at {when}. Select it in the sidebar on any page.")


def sample_rows(job: TrainJob) -> list[dict[str, Any]]:
    """One row per validation from step 0, with the model's translation of the sentence to watch then
    (prefixed with its source when an earlier session watched another sentence)."""
    seen = {s.step: s for s in job.snapshots}

    def sample(step: int) -> str:
        snap = seen.get(step)
        if snap is None:
            return ""
        return snap.translation if snap.source == job.sample else f"{snap.source} → {snap.translation}"
    return [{"step": v.step, "val loss": round(v.val_loss, 3), "BLEU": v.bleu}
            | ({"exact (%)": round(100 * v.exact, 1)} if v.exact is not None else {})
            | {"sample": sample(v.step)} for v in job.validations()]


def progress(job: TrainJob) -> None:
    """Status, progress bar (ETA only while running), why it ended, curves and snapshots of the sentence to
    watch, and the validations; a resumed run's from step 0."""
    last = job.last
    st.progress(min(1.0, last.step / max(last.total_steps, 1)) if last else 0.0, text=status_line(job))
    if job.error:
        st.error(f"Training failed: {plain(job.error)}. Checkpoints written before the failure are kept; "
                 "Resume continues from the last one.")
    ended = ending(job)
    if ended:
        (st.info if job.ended_by == Ending.STOPPED_BY_USER else st.success)(ended)
    if job.published:
        st.success(saved_note(job))
    validations = job.validations()
    if job.events or validations:
        steps, losses = job.loss_curve()
        fig = learning_curves(steps, losses, [v.step for v in validations], [v.val_loss for v in validations],
                              [v.bleu for v in validations], [v.exact for v in validations])
        widgets.chart(fig, f"curves-{job.id}")
    if job.snapshots:
        snapshot_view(job)
    rows = sample_rows(job)
    if rows:
        st.caption(f"The sample column is the model's translation of the sentence to watch, “{plain(job.sample)}”, "
                   "at each validation.")
        tables.rows_table(rows, tables.VALIDATIONS)


def snapshot_view(job: TrainJob) -> None:
    """The sample's cross-attention at a validation: follows the latest unless the user picked an earlier one."""
    key, follow = state.snapshot_keys(job.id)
    last = len(job.snapshots) - 1
    if state.stored(follow, True) or state.stored(key, last) > last:
        state.store(key, last)
    index = st.select_slider("Attention at validation (step)", options=list(range(len(job.snapshots))),
                             format_func=lambda i: str(job.snapshots[i].step), key=key,
                             on_change=_follow_if_last, args=(job, key, follow))
    snap = job.snapshots[index]
    score = f"val BLEU {snap.bleu}" + (f", held-out exact {100 * snap.exact:.1f}%" if snap.exact is not None else "")
    st.markdown(f"**Step {snap.step}** ({score}): {plain(snap.source)} → {plain(snap.translation)}")
    if snap.hit_limit:
        st.caption(f"The model has not learned to stop yet: it wrote {len(snap.generated)} tokens, the length limit.")
    layer = snap.record.n_layers("cross") - 1
    widgets.chart(record_heatmap(snap.record, "cross", layer, None, row_labels=snap.generated), f"snapshot-heatmap-{job.id}")


def _follow_if_last(job: TrainJob, key: str, follow: str) -> None:
    state.store(follow, state.stored(key) == len(job.snapshots) - 1)
