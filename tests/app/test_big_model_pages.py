"""A model too big for the exact attribution methods' float64 copy of one layer: the Attribution page and the Step
page's attribution say so in one sentence (what it needs, what is available, what to do) instead of a traceback, and the
rest of the app keeps working."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import attnscope.engine.attribution.exact_pass as exact_pass
from tests.support import page_script

SENTENCE = ("the float64 copy of one layer that value zeroing and ALTI+ need has 1,000 weights, which need about "
            "9.9 GB of memory as float64, more than the 1.0 GB this machine has available now: close other programs")


@pytest.fixture
def no_room(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exact_pass, "model_refusal", lambda *_: SENTENCE)


def test_the_attribution_page_says_the_copy_does_not_fit(app: AppTest, no_room: None) -> None:
    app.session_state["sentence"] = "a b c d"
    app.run()
    app.switch_page(page_script("Attribution")).run()
    assert not app.exception, [e.value for e in app.exception]
    assert [e.value for e in app.error] == [SENTENCE]
    app.switch_page(page_script("Translate")).run()
    assert not app.exception and not app.error


@pytest.mark.parametrize("tab", ["Source tokens by method", "Alignment", "Dataset"])
def test_every_attribution_tab_that_needs_the_copy_says_so(app: AppTest, no_room: None, tab: str) -> None:
    app.session_state["sentence"] = "a b c d"
    app.session_state["attr_tab"] = tab
    app.run()
    app.switch_page(page_script("Attribution")).run()
    assert not app.exception, [e.value for e in app.exception]
    assert SENTENCE in [e.value for e in app.error]


def test_the_step_page_attribution_says_it_too(app: AppTest, no_room: None) -> None:
    app.session_state["sentence"] = "a b c d"
    app.session_state["step_attr"] = True
    app.run()
    app.switch_page(page_script("Step through decoding")).run()
    assert not app.exception, [e.value for e in app.exception]
    assert SENTENCE in [e.value for e in app.error]


def test_the_checkpoints_page_reads_no_checkpoint_file_until_download_is_clicked(
        app: AppTest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1.3B model's checkpoint is 5 GB: reading it for the Download button on every run took 30 s and 5 GB."""
    from pathlib import Path

    read = Path.read_bytes

    def guarded(path: Path) -> bytes:
        assert path.suffix != ".safetensors", f"{path.name} was read by a page run"
        return read(path)

    monkeypatch.setattr(Path, "read_bytes", guarded)
    app.run()
    app.switch_page(page_script("Checkpoints")).run()
    assert not app.exception, [e.value for e in app.exception]
