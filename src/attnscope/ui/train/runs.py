"""The Train page's runs: the jobs this server started, this session's current one, and the Start/Resume/Stop
controls."""
from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import streamlit as st

from attnscope.checkpoints.registry import user_dir
from attnscope.training.config import TrainConfig
from attnscope.training.data import DataError
from attnscope.training.jobs import TrainJob, estimate_epoch_seconds, existing_run, free_name
from attnscope.ui import state
from attnscope.ui.text import plain


@st.cache_resource
def jobs() -> dict[str, TrainJob]:
    """Every job started in this server process, by id (each session remembers its own)."""
    return {}


_JOBS_LOCK = threading.Lock()
JOB = state.Key("train_job")  # the id of the job this session started last


def runs_dir() -> Path:
    return user_dir() / "runs"


def current_job() -> TrainJob | None:
    """This session's latest job, if any."""
    return jobs().get(state.stored(JOB, ""))


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
    state.store(JOB, job.id)
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

