"""AppTest journeys on the Train page: train a toy model and use it, stop/resume/start new, a form that
keeps its values, names that follow the task, a snapshot slider that follows the latest validation, a
resumed run shown from step 0, the sentence to watch in the table, and why a run ended."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from attnscope.training.jobs import TrainJob
from attnscope.ui.train import runs
from tests.support import CEILING, explorers, page_script, shown, unexplained_columns, wait_for


@pytest.fixture
def train_page(app: AppTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("ATTNSCOPE_USER_MODELS", str(tmp_path / "user_models"))
    app.run()
    return app.switch_page(page_script("Train")).run()


def widget(app: AppTest, kind: str, key: str):
    """A form widget by its value's key (the widget itself uses persist.keep's shadow key)."""
    return getattr(app, kind)(key=f"_w_{key}")


def started(app: AppTest, button: str = "train_start") -> TrainJob:
    app.button(key=button).click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    return runs.jobs()[app.session_state["train_job"]]


def wait_for_a_step(job: TrainJob) -> None:
    wait_for(lambda: any(e.kind == "step" for e in job.events) or job.done, "a training step")


def test_train_a_toy_task_to_completion_and_use_it(train_page: AppTest, capfd: pytest.CaptureFixture[str]) -> None:
    app = train_page
    assert not app.exception
    widget(app, "selectbox", "train_task").set_value("copy")
    widget(app, "number_input", "train_epochs").set_value(1)
    widget(app, "number_input", "train_eval_every").set_value(20)
    widget(app, "number_input", "train_patience").set_value(50)
    widget(app, "text_input", "train_name").set_value("my copy model")
    widget(app, "text_input", "train_sample").set_value("c a b")
    job = started(app)
    assert job.config.patience == 50
    job.wait(timeout=CEILING)
    assert job.status == "finished" and not job.stopped_early, job.error
    evals = [e for e in job.events if e.kind == "eval"]
    assert len(evals) >= 2 and all(e.exact is not None for e in evals)
    app.run()
    saved = next(shown(s) for s in app.success if shown(s).startswith("Saved as my-copy-model"))
    best = max(job.validations(), key=lambda v: v.bleu)  # the first of the best: a later equal score is not better
    assert f"val BLEU {best.bleu}" in saved and (f"at step {best.step} (the run went on to step {job.last.step})" in saved
                                                  if best.step != job.last.step else "at its last step" in saved)
    assert '"kind": "eval"' not in capfd.readouterr().out  # no JSON progress lines in the server's log
    assert any(shown(s).startswith("Finished: the run trained all its epochs (1, step ") for s in app.success)
    table = app.dataframe[-1].value
    assert "exact (%)" in table.columns and not unexplained_columns(app.dataframe[-1])
    # the sample column is the sentence the user chose to watch, as the model translated it at each validation
    assert all(s.record.source_tokens[:3] == ("c", "a", "b") for s in job.snapshots)
    assert list(table["sample"]) == [s.translation for s in job.snapshots] and list(table["step"]) == [
        e.step for e in evals]
    assert any("“c a b”" in shown(c) for c in app.caption)
    # the snapshot slider shows the latest validation, labelled with what the model generated
    assert app.select_slider(key=f"snapshot-{job.id}").value == len(job.snapshots) - 1
    (snapshot,) = explorers(app)  # its cross-attention in the explorer, rows labelled by what it generated
    assert snapshot.header["output"] == list(job.snapshots[-1].generated) and snapshot.header["kind"] == "cross"
    assert "<bos>" not in job.snapshots[-1].generated
    app.select_slider(key=f"snapshot-{job.id}").set_value(0).run()
    assert app.select_slider(key=f"snapshot-{job.id}").value == 0  # the user's choice stays
    app.switch_page(page_script("Checkpoints")).run()
    assert "my-copy-model" in list(app.dataframe[0].value["name"])
    app.session_state["checkpoint"] = "my-copy-model"
    app.session_state["sentence"] = "a b c"
    app.switch_page(page_script("Translate")).run()
    assert not app.exception
    assert len(explorers(app)) == 1  # the trained model's attention, in the browser


def test_after_stop_resume_and_start_new_are_there_and_resume_continues(train_page: AppTest) -> None:
    app = train_page
    widget(app, "selectbox", "train_task").set_value("sort")
    widget(app, "number_input", "train_epochs").set_value(200).run()
    assert app.button(key="train_stop").disabled and app.button(key="train_resume").disabled
    job = started(app)
    assert not app.button(key="train_stop").disabled and app.button(key="train_start").disabled
    wait_for_a_step(job)
    app.button(key="train_stop").click().run()
    job.wait(timeout=CEILING)
    assert job.status == "stopped" and job.published is not None and job.published.exists()
    app.run()
    assert not app.button(key="train_start").disabled and not app.button(key="train_resume").disabled
    assert app.button(key="train_stop").disabled
    assert widget(app, "number_input", "train_epochs").value == 200  # the form kept its values
    assert "min left" not in app.get("progress")[0].proto.text  # a stopped run has no ETA
    assert any("Resume** continues it" in shown(i) and "toy-sort-2" in shown(i) for i in app.info)
    stopped_at = json.loads((Path(job.config.out_dir) / "log.jsonl").read_text().splitlines()[-1])["step"]
    assert any(shown(i) == f"Stopped by you at step {stopped_at}; Resume continues from there." for i in app.info)
    again = started(app, "train_resume")
    assert again.config.out_dir == job.config.out_dir and again.resume
    wait_for_a_step(again)
    again.stop()
    again.wait(timeout=CEILING)
    assert next(e.step for e in again.events if e.kind == "step") == stopped_at + 1
    # the resumed run shows its whole history: the first session's validation and snapshot come first
    app.run()
    before = [e.step for e in job.events if e.kind == "eval"]
    after = [e.step for e in again.events if e.kind == "eval"]
    table = app.dataframe[-1].value
    assert list(table["step"]) == before + after and before[-1] == stopped_at and after[0] > stopped_at
    assert list(table["sample"]) == [s.translation for s in again.snapshots]
    assert [s.step for s in again.snapshots] == before + after  # the slider reaches back to step 0 too
    curves = json.loads(app.get("plotly_chart")[0].proto.spec)["data"]
    assert curves[0]["x"][0] == stopped_at and curves[1]["x"] == before + after  # training loss, validation loss


def test_start_new_never_continues_an_existing_run(train_page: AppTest) -> None:
    app = train_page
    widget(app, "number_input", "train_epochs").set_value(200).run()
    first = started(app)
    wait_for_a_step(first)
    first.stop()
    first.wait(timeout=CEILING)
    app.run()
    second = started(app)
    second.stop()
    second.wait(timeout=CEILING)
    assert Path(second.config.out_dir).name == "toy-reverse-2" and not second.resume
    assert second.published.stem == "toy-reverse-2"


def test_the_form_keeps_its_values_when_you_leave_and_come_back(train_page: AppTest) -> None:
    app = train_page
    widget(app, "selectbox", "train_task").set_value("sort")
    widget(app, "number_input", "train_epochs").set_value(7)
    widget(app, "number_input", "train_lr").set_value(0.004).run()
    app.switch_page(page_script("Translate")).run()
    app.switch_page(page_script("Train")).run()
    assert widget(app, "selectbox", "train_task").value == "sort"
    assert widget(app, "number_input", "train_epochs").value == 7
    assert widget(app, "number_input", "train_lr").value == pytest.approx(0.004)


def test_the_run_name_follows_the_task_until_the_user_names_it(train_page: AppTest) -> None:
    app = train_page
    assert widget(app, "text_input", "train_name").value == "toy-reverse"
    widget(app, "selectbox", "train_task").set_value("sort").run()
    assert widget(app, "text_input", "train_name").value == "toy-sort"
    widget(app, "text_input", "train_name").set_value("mine").run()
    widget(app, "selectbox", "train_task").set_value("copy").run()
    assert widget(app, "text_input", "train_name").value == "mine"


def test_the_toy_preset_is_the_measured_recipe(train_page: AppTest) -> None:
    from attnscope.training.toy import TOY_MODEL, TOY_SCHEDULE
    app = train_page
    assert widget(app, "number_input", "train_enc").value == TOY_MODEL["n_encoder_layers"]
    assert widget(app, "selectbox", "train_norm").value == TOY_MODEL["norm"]
    assert widget(app, "number_input", "train_tokens").value == TOY_SCHEDULE["max_tokens"]
    assert widget(app, "number_input", "train_eval_every").value == TOY_SCHEDULE["eval_every"]
    assert widget(app, "number_input", "train_epochs").value == TOY_SCHEDULE["epochs"]


def test_estimate_reports_seconds_per_epoch(train_page: AppTest) -> None:
    app = train_page
    app.button(key="train_estimate").click().run()
    assert not app.exception
    assert any("per epoch" in shown(i) for i in app.info)


def test_multi30k_without_data_says_what_is_missing(train_page: AppTest, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ATTNSCOPE_DATA", str(tmp_path / "nothing"))
    app = train_page
    widget(app, "radio", "train_data").set_value("Multi30k").run()
    assert not app.exception
    message = next(shown(w) for w in app.warning if "missing corpus file" in shown(w))
    assert "`" not in message
    assert app.button(key="train_start").disabled
    assert widget(app, "text_input", "train_name").value == "my-en-de"
    assert widget(app, "number_input", "train_tokens").value == 4000
