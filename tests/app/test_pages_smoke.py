"""Every page runs without an exception and shows its main content."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

PAGES = {"pages/translate.py": 6, "pages/step.py": 6, "pages/heads.py": 1, "pages/positional.py": 7,
         "pages/anatomy.py": 0}


@pytest.mark.parametrize("page,min_charts", PAGES.items())
def test_page_runs(app: AppTest, page: str, min_charts: int) -> None:
    app.session_state["sentence"] = "a b c"
    app.run()
    app.switch_page(page).run()
    assert not app.exception, [e.value for e in app.exception]
    assert len(app.get("plotly_chart")) >= min_charts
