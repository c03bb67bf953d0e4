"""Train a model in the background and watch it learn: curves, samples, attention forming."""
import streamlit as st

from attnscope.ui.navigation import open_page
from attnscope.ui.train import form, progress, runs

open_page("Train", needs_model=False)
config, sample = form.run_form()
runs.controls(config, sample)
job = runs.current_job()
running = job is not None and not job.done


@st.fragment(run_every=2.0 if running else None)
def live() -> None:
    current = runs.current_job()
    if current is None:
        return
    if running and current.done:  # the run ended: redraw the whole page so the controls follow
        st.rerun()
    progress.progress(current)


live()
