"""Widgets of the Train page: the run form, live progress, and the attention scrubber."""
from __future__ import annotations

import threading

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from attnscope.checkpoints.registry import user_dir
from attnscope.model.config import PRESETS
from attnscope.model.device import autocast_dtype, pick_device
from attnscope.training.config import TrainConfig
from attnscope.training.data import LANGUAGES, TOY_TASKS, DataError, corpus_file, data_dir
from attnscope.training.jobs import TrainJob, estimate_epoch_seconds
from attnscope.ui import widgets
from attnscope.ui.text import plain
from attnscope.viz.heatmap import record_heatmap

MAX_EPOCHS = 200
MAX_STEPS = 200_000


@st.cache_resource
def jobs() -> dict[str, TrainJob]:
    """Every job started in this server process, by id (each session remembers its own)."""
    return {}


_JOBS_LOCK = threading.Lock()


def multi30k_available(src: str, tgt: str) -> str | None:
    """None if the training and validation files exist, else the message saying what is missing."""
    try:
        for split in ("train", "val"):
            for lang in (src, tgt):
                corpus_file(data_dir(), split, lang)
    except DataError as err:
        return str(err)
    return None


def run_form() -> TrainConfig | None:
    """The settings of a new run; None while they are incomplete."""
    device = pick_device()
    dtype = autocast_dtype(device)
    st.info(f"Training runs on **{device.type.upper()}**" + (" with bf16 autocast." if dtype else " in fp32."))
    cols = st.columns(3)
    source = cols[0].radio("Data", ["Toy task", "Multi30k"], key="train_data", horizontal=True)
    if source == "Toy task":
        task, src, tgt = cols[1].selectbox("Task", TOY_TASKS, key="train_task"), "en", "en"
    else:
        task = "multi30k"
        src = cols[1].selectbox("Source language", LANGUAGES, key="train_src")
        tgt = cols[2].selectbox("Target language", [lang for lang in LANGUAGES if lang != src], key="train_tgt")
        missing = multi30k_available(src, tgt)
        if missing:
            st.warning(plain(missing))
            return None
    preset = st.selectbox("Model size", list(PRESETS), index=0 if task != "multi30k" else 1, key="train_preset")
    overrides = {}
    with st.expander("Expert settings (ModelConfig fields)"):
        base = PRESETS[preset]
        c = st.columns(4)
        overrides["d_model"] = c[0].number_input("d_model", 8, 1024, base["d_model"], step=8, key="train_d_model")
        overrides["n_heads"] = c[1].number_input("heads", 1, 16, base["n_heads"], key="train_heads")
        overrides["n_encoder_layers"] = c[2].number_input("encoder layers", 1, 12, base["n_encoder_layers"], key="train_enc")
        overrides["n_decoder_layers"] = c[3].number_input("decoder layers", 1, 12, base["n_decoder_layers"], key="train_dec")
        overrides["d_ff"] = c[0].number_input("d_ff", 8, 4096, base["d_ff"], step=8, key="train_ff")
        overrides["dropout"] = c[1].number_input("dropout", 0.0, 0.9, float(base.get("dropout", 0.1)), step=0.05,
                                                 key="train_dropout")
        overrides["positional"] = c[2].selectbox("positional", ["sinusoidal", "learned"], key="train_pos")
        overrides["norm"] = c[3].selectbox("norm", ["post", "pre"], key="train_norm")
    c = st.columns(4)
    toy = task != "multi30k"
    epochs = c[0].number_input(f"Epochs (max {MAX_EPOCHS})", 1, MAX_EPOCHS, 10 if toy else 20, key="train_epochs")
    max_tokens = c[1].number_input("Batch size (padded tokens)", 100, 20_000, 600 if toy else 4000, step=100,
                                   key="train_tokens")
    lr = c[2].number_input("Peak learning rate", 1e-5, 1e-2, 3e-3 if toy else 1e-3, format="%.5f", key="train_lr")
    warmup = c[3].number_input("Warm-up steps", 1, 10_000, 100 if toy else 1000, key="train_warmup")
    name = st.text_input("Run name", f"toy-{task}" if toy else f"my-{src}-{tgt}", key="train_name", max_chars=60)
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name).strip("-") or "run"
    try:
        return TrainConfig(out_dir=str(user_dir() / "runs" / safe), task=task, src_lang=src, tgt_lang=tgt,
                           data_dir=str(data_dir()), preset=preset, model=overrides, epochs=int(epochs),
                           max_tokens=int(max_tokens), lr=float(lr), warmup=int(warmup), name=safe,
                           bleu_sentences=200 if task == "multi30k" else None, save_minutes=2.0)
    except ValueError as err:
        st.error(plain(err))
        return None


def start(config: TrainConfig, sample: str) -> TrainJob:
    job = TrainJob(config, sample, user_dir())
    with _JOBS_LOCK:
        jobs()[job.id] = job
    st.session_state["train_job"] = job.id
    return job.start()


def estimate(config: TrainConfig) -> None:
    with st.spinner("Timing a few training steps…"):
        try:
            seconds, n_batches = estimate_epoch_seconds(config)
        except (DataError, ValueError) as err:
            st.error(plain(err))
            return
    st.info(f"About {seconds:.0f} s per epoch ({n_batches} batches), so {config.epochs} epochs ≈ "
            f"{seconds * config.epochs / 60:.1f} min on this machine.")


def curves(job: TrainJob) -> go.Figure:
    steps = [e for e in job.events if e.kind == "step"]
    evals = [e for e in job.events if e.kind == "eval"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[e.step for e in steps], y=[e.loss for e in steps], name="training loss (smoothed)"))
    eval_steps = [e.step for e in evals]
    fig.add_trace(go.Scatter(x=eval_steps, y=[e.val_loss for e in evals], name="validation loss", mode="lines+markers"))
    fig.add_trace(go.Scatter(x=eval_steps, y=[e.bleu for e in evals], name="validation BLEU", yaxis="y2",
                             mode="lines+markers"))
    fig.update_layout(title="Learning curves", xaxis_title="step", yaxis_title="loss",
                      yaxis2=dict(title="BLEU", overlaying="y", side="right"), height=360, margin=dict(l=10, r=10, t=50, b=10))
    return fig


def progress(job: TrainJob) -> None:
    """Status, progress bar with ETA, curves, and the attention snapshots of the sample sentence."""
    last = job.last
    if last is not None:
        frac = min(1.0, last.step / max(last.total_steps, 1))
        eta = last.elapsed / max(frac, 1e-9) * (1 - frac) if frac > 0 else float("nan")
        st.progress(frac, text=f"{job.status}: step {last.step}/{last.total_steps}, epoch {last.epoch}, "
                               f"loss {last.loss:.3f}, {last.tokens_per_second:.0f} tokens/s, ETA {eta / 60:.1f} min")
    else:
        st.progress(0.0, text=f"{job.status}: preparing data and model…")
    if job.error:
        st.error(f"Training failed: {plain(job.error)}. Checkpoints written before the failure are kept; start again to resume.")
    if job.published:
        st.success(f"Saved as {job.published.stem}: select it in the sidebar on any page.")
    if job.events:
        widgets.chart(curves(job), f"curves-{job.id}")
    if job.snapshots:
        index = st.select_slider("Attention at validation (step)", options=list(range(len(job.snapshots))),
                                 value=len(job.snapshots) - 1, format_func=lambda i: str(job.snapshots[i].step),
                                 key=f"snapshot-{job.id}")
        snap = job.snapshots[index]
        st.markdown(f"**Step {snap.step}** (val BLEU {snap.bleu}): {plain(job.sample)} → {plain(snap.translation)}")
        layer = snap.record.n_layers("cross") - 1
        widgets.chart(record_heatmap(snap.record, "cross", layer, None), f"snapshot-heatmap-{job.id}")
    rows = [{"step": e.step, "val loss": round(e.val_loss or 0, 3), "BLEU": e.bleu, "sample": e.sample[1] if e.sample else ""}
            for e in job.events if e.kind == "eval"]
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
