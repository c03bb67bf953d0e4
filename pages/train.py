"""Train a model in the background and watch it learn: curves, samples, attention forming."""
import streamlit as st

from attnscope.ui import state, train_tools

state.through_router()
st.title("Train")
job = train_tools.jobs().get(st.session_state.get("train_job", ""))

if job is None or job.done:
    config = train_tools.run_form()
    sample = st.text_input("Sample sentence to watch", "a b c d e f" if config and config.task != "multi30k"
                           else "Two dogs are running through the snow.", key="train_sample", max_chars=300)
    cols = st.columns(2)
    if config is not None and cols[0].button("Estimate time per epoch", key="train_estimate"):
        train_tools.estimate(config)
    if config is not None and cols[1].button("Start training", type="primary", key="train_start"):
        job = train_tools.start(config, sample)
        st.rerun()


@st.fragment(run_every=2.0)
def live() -> None:
    current = train_tools.jobs().get(st.session_state.get("train_job", ""))
    if current is None:
        return
    if not current.done and st.button("Stop", key="train_stop"):
        current.stop()
    train_tools.progress(current)


live()
