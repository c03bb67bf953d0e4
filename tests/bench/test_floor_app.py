"""The bench's floor app (the least an app that shows one translation holds) shows what the app would show."""
from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from attnscope.checkpoints import checkpoint
from attnscope.engine.decoding.translator import Translator
from tests.support import CEILING, ROOT, copy_toy_checkpoint

FLOOR_APP = ROOT / "src" / "attnscope" / "bench" / "floor_app.py"


def test_the_floor_app_shows_the_checkpoints_translation_then_a_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy_toy_checkpoint(tmp_path)
    (path,) = tmp_path.glob("*.safetensors")
    want = Translator(*checkpoint.load(path)).translate("a b c").text
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(tmp_path))
    st.cache_resource.clear()
    at = AppTest.from_file(str(FLOOR_APP), default_timeout=CEILING)
    at.query_params["sentence"] = "a b c"
    at.run()
    assert not at.exception and [m.value for m in at.markdown][0] == want
    assert at.caption[-1].value == "floor drawn" and not at.dataframe
    at.query_params["table"] = "1"
    at.run()
    assert not at.exception and len(at.dataframe) == 1 and at.dataframe[0].value.shape == (3, 2)
