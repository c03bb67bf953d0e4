"""The Train page's live view of a run: status, why it ended, curves, validations and attention snapshots."""
from __future__ import annotations

from typing import Any

import streamlit as st

from attnscope.checkpoints import checkpoint
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.training.jobs import Ending, TrainJob
from attnscope.ui import state, tables, widgets
from attnscope.ui.explorer import explorer
from attnscope.ui.text import plain
from attnscope.ui.train import runs
from attnscope.viz.training import learning_curves


def status_line(job: TrainJob) -> str:
    last = job.last
    if last is None:
        return f"{job.status}: preparing data and model…"
    exact = next((v.exact for v in reversed(job.validations()) if v.exact is not None), None)
    eta = job.eta_seconds()
    return (f"{job.status}: step {last.step}/{last.total_steps}, epoch {last.epoch:g}, loss {last.loss:.3f}, "
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


def live_view() -> None:
    """The current job's progress, redrawn every 2 s while it runs; when it ends the whole page reruns, so that the
    controls follow."""
    job = runs.current_job()
    running = job is not None and not job.done

    @st.fragment(run_every=2.0 if running else None)
    def live() -> None:
        current = runs.current_job()
        if current is None:
            return
        if running and current.done:
            st.rerun()
        progress(current)

    live()


def snapshot_keys(job_id: str) -> tuple[state.Key, state.Key]:
    """The snapshot slider of one job, and whether it follows the latest snapshot."""
    return state.Key(f"snapshot-{job_id}"), state.Key(f"snapshot-follow-{job_id}")


def snapshot_view(job: TrainJob) -> None:
    """The sample's cross-attention at a validation: follows the latest unless the user picked an earlier one."""
    key, follow = snapshot_keys(job.id)
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
    explorer(snap.record, state.read(), ("snapshot", job.id, snap.step), f"explorer-snapshot-{job.id}",
             output_tokens=snap.generated, mode="map", kind="cross", title=f"Step {snap.step}", caption=False)


def _follow_if_last(job: TrainJob, key: str, follow: str) -> None:
    state.store(follow, state.stored(key) == len(job.snapshots) - 1)
