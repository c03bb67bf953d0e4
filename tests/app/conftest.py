"""AppTest fixtures: the committed toy 'reverse' checkpoint, served as the only checkpoint."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.support import CEILING, ROOT, copy_toy_checkpoint, page_script

APP = str(ROOT / "app.py")


@pytest.fixture(scope="session")
def toy_checkpoint_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding one checkpoint: a tiny model trained to reverse letter strings."""
    folder = tmp_path_factory.mktemp("checkpoints")
    copy_toy_checkpoint(folder)
    return folder


def app_on(checkpoints: Path, monkeypatch: pytest.MonkeyPatch, sentence: str | None = None,
           max_len: int | None = None) -> AppTest:
    """The app serving the checkpoints in `checkpoints`, with caches cleared so every test starts fresh; with a
    `sentence` (and `max_len`), run once on it."""
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(checkpoints))
    st.cache_data.clear()
    st.cache_resource.clear()
    app = AppTest.from_file(APP, default_timeout=CEILING)  # a ceiling for a hang, not a speed limit
    if sentence is not None:
        app.session_state["sentence"] = sentence
        if max_len is not None:
            app.session_state["max_len"] = max_len
        app.run()
    return app


@pytest.fixture
def app(toy_checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The app against the toy checkpoint."""
    return app_on(toy_checkpoint_dir, monkeypatch)


@pytest.fixture
def checkpoints_page(app: AppTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The Checkpoints page after a first translation, with a user-models folder of its own."""
    monkeypatch.setenv("ATTNSCOPE_USER_MODELS", str(tmp_path / "user_models"))
    app.session_state["sentence"] = "a b c"
    app.run()
    return app.switch_page(page_script("Checkpoints")).run()


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server_log() -> Iterator[list[logging.LogRecord]]:
    """What the server would log during the test (INFO and up). Streamlit's loggers have their own handlers
    and do not propagate, so pytest's caplog misses them: a handler goes on each of them and on the root."""
    keep = _Keep()
    loggers = [logging.getLogger()] + [logging.getLogger(n) for n in list(logging.root.manager.loggerDict)
                                       if n.startswith("streamlit")]
    levels = [(logger, logger.level) for logger in loggers]
    for logger in loggers:
        logger.addHandler(keep)
        logger.setLevel(logging.INFO)
    yield keep.records
    for logger, level in levels:
        logger.removeHandler(keep)
        logger.setLevel(level)

