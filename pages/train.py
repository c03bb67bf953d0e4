"""Train a model in the background and watch it learn: curves, samples, attention forming."""
import streamlit as st

from attnscope.ui import train_tools
from attnscope.ui.navigation import open_page

open_page("Train", needs_model=False)
config, sample = train_tools.run_form()
train_tools.controls(config, sample)
job = train_tools.current_job()
running = job is not None and not job.done


@st.fragment(run_every=2.0 if running else None)
def live() -> None:
    current = train_tools.current_job()
    if current is None:
        return
    if running and current.done:  # the run ended: redraw the whole page so the controls follow
        st.rerun()
    train_tools.progress(current)


live()
