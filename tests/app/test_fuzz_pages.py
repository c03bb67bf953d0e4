"""Generated text through the Translate and Step pages: never an exception, never markup."""
from __future__ import annotations

import re

import pytest
import streamlit as st
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hst
from streamlit.testing.v1 import AppTest

from tests.app.conftest import APP
from tests.support import CEILING, page_script

TEXTS = hst.one_of(hst.text(max_size=200), hst.sampled_from(
    ["", "   ", "\x00\x01", "<script>alert('x')</script>", "**bold** [link](javascript:alert(1))", "😀" * 30,
     "مرحبا", "a" * 5000, "a b c", "\u202eabc"]))


@pytest.mark.parametrize("page", [page_script("Translate"), page_script("Step through decoding")])
def test_pages_survive_any_text(toy_checkpoint_dir, monkeypatch: pytest.MonkeyPatch, page: str) -> None:
    monkeypatch.setenv("ATTNSCOPE_CHECKPOINTS", str(toy_checkpoint_dir))
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=CEILING)  # one session typing one text after another
    at.run()
    at.switch_page(page).run()

    @settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(text=TEXTS)
    def check(text: str) -> None:
        at.session_state["sentence"] = text
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        for element in (*at.markdown, *at.info, *at.warning):  # our own templates use neither < nor [
            assert not re.search(r"(?<!\\)[<\[`]", element.value), element.value

    check()
