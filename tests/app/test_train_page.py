"""AppTest journey: train a toy model from the browser page, see it finish and use it everywhere."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from attnscope.ui import train_tools
from tests.support import shown


@pytest.fixture
def train_page(app: AppTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("ATTNSCOPE_USER_MODELS", str(tmp_path / "user_models"))
    app.run()
    return app.switch_page("pages/train.py").run()


def test_train_a_toy_task_to_completion_and_use_it(train_page: AppTest) -> None:
    app = train_page
    assert not app.exception
    app.selectbox(key="train_task").set_value("copy")
    app.number_input(key="train_epochs").set_value(8)
    app.text_input(key="train_name").set_value("my copy model")
    app.button(key="train_start").click().run()
    job = train_tools.jobs()[app.session_state["train_job"]]
    job.wait(timeout=240)
    assert job.status == "finished", job.error
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
    app.selectbox(key="train_task").set_value("sort")
    app.number_input(key="train_epochs").set_value(200)
    app.text_input(key="train_name").set_value("stopped")
    app.button(key="train_start").click().run()
    job = train_tools.jobs()[app.session_state["train_job"]]
    while not job.events and not job.done:
        job.wait(timeout=0.5)
    job.stop()
    job.wait(timeout=120)
    assert job.status == "stopped"
    assert job.published is not None and job.published.exists()


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
