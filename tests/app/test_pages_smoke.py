"""Every page runs without an exception and shows its main content."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from attnscope.ui import tables
from tests.support import explorers, page_script, unexplained_columns

# How many figures (plotly charts, viz/html views and attention explorers) each page draws for "a b c" on the toy
# model, on first load (Translate, Step and Heads one explorer each, which draws every kind, head and step in the
# browser; no forced branch until one is picked; Heads and Attribution their open tab only: the head statistics'
# table, the source/prefix split; anatomy
# shows tables only), counting the HTML of the translation headline (Translate, Heads, Attribution) and of the note
# for a sentence not yet translated (every page that translates).
# A page that drops or adds a figure must change this number on purpose.
PAGES = {"Translate": 3, "Step through decoding": 2, "Heads & layers": 3, "Positional encoding": 7, "Model anatomy": 0,
         "Attribution": 3}


@pytest.mark.parametrize("page,charts", PAGES.items())
def test_page_runs_and_draws_its_figures(app: AppTest, page: str, charts: int) -> None:
    app.session_state["sentence"] = "a b c"
    app.run()
    app.switch_page(page_script(page)).run()
    assert not app.exception, [e.value for e in app.exception]
    assert len(app.get("plotly_chart")) + len(app.get("html")) + len(explorers(app)) == charts


def test_anatomy_shows_shapes_without_warnings(app: AppTest) -> None:
    app.session_state["sentence"] = "a b c"
    app.run()
    app.switch_page(page_script("Model anatomy")).run()
    assert not app.warning and len(app.dataframe) == 2
    assert not [unexplained_columns(table) for table in app.dataframe if unexplained_columns(table)]
    config = app.table[0].value.set_index("setting")  # the config: every setting with what it changes, in full
    assert config.loc["d_model", "meaning"].startswith("Width of the residual stream") and config["meaning"].all()
    assert dict(config["meaning"]) == {k: v for k, v in tables.CONFIG_FIELDS.items() if k in config.index}


def test_switching_to_a_model_with_a_shorter_limit_clamps_the_length(app: AppTest) -> None:
    app.session_state["max_len"] = 500
    app.session_state["sentence"] = "a b"
    app.run()
    assert not app.exception
    assert app.session_state["max_len"] == 64
