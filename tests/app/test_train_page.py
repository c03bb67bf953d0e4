"""AppTest journey: train a toy model from the browser page, see it finish and use it everywhere."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from attnscope.ui import train_tools
from attnscope.ui.train_tools import MAX_EPOCHS
from tests.support import shown, wait_for


@pytest.fixture
def train_page(app: AppTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("ATTNSCOPE_USER_MODELS", str(tmp_path / "user_models"))
    app.run()
    return app.switch_page("pages/train.py").run()


def tiny_run(app: AppTest, task: str, epochs: int, name: str) -> None:
    """Fill the form for the smallest model the page allows (the assertions need a run, not learning)."""
    app.selectbox(key="train_task").set_value(task)
    for key, value in (("train_d_model", 16), ("train_heads", 2), ("train_enc", 1), ("train_dec", 1), ("train_ff", 16)):
        app.number_input(key=key).set_value(value)
    app.number_input(key="train_epochs").set_value(epochs)
    app.text_input(key="train_name").set_value(name)


def test_train_a_toy_task_to_completion_and_use_it(train_page: AppTest) -> None:
    app = train_page
    assert not app.exception
    tiny_run(app, "copy", 1, "my copy model")
    app.button(key="train_start").click().run()
    job = train_tools.jobs()[app.session_state["train_job"]]
    wait_for(lambda: job.done, "the run to finish")
    assert job.status == "finished", job.error
    assert job.trainer.model.config.d_model == 16
    assert job.snapshots and job.snapshots[-1].record.cross.shape[-1] == len(job.snapshots[-1].record.source_tokens)
    app.run()
    assert any("Saved as my-copy-model" in shown(s) for s in app.success)
    app.switch_page("pages/checkpoints.py").run()
    assert "my-copy-model" in list(app.dataframe[0].value["name"])
    app.session_state["checkpoint"] = "my-copy-model"
    app.session_state["sentence"] = "a b c"
    app.switch_page("pages/translate.py").run()
    assert not app.exception
    assert len(app.get("plotly_chart")) == 6


def test_stopping_a_run_keeps_its_checkpoint(train_page: AppTest) -> None:
    app = train_page
    tiny_run(app, "sort", MAX_EPOCHS, "stopped")
    app.number_input(key="train_tokens").set_value(100)  # with the most epochs: still running when stopped, however fast
    app.button(key="train_start").click().run()
    job = train_tools.jobs()[app.session_state["train_job"]]
    wait_for(lambda: job.events or job.done, "the first training step")
    job.stop()
    wait_for(lambda: job.done, "the run to stop")
    assert job.status == "stopped", job.error
    assert job.published is not None and job.published.exists()
    assert [e.kind for e in job.events][-2:] == ["eval", "done"]  # stopping validates before saving


def test_estimate_reports_seconds_per_epoch(train_page: AppTest) -> None:
    app = train_page
    app.button(key="train_estimate").click().run()
    assert not app.exception
    assert any("per epoch" in shown(i) for i in app.info)


def test_multi30k_without_data_says_what_is_missing(train_page: AppTest, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path / "nothing"))
    app = train_page
    app.radio(key="train_data").set_value("Multi30k").run()
    assert not app.exception
    assert any("missing corpus file" in shown(w) for w in app.warning)
