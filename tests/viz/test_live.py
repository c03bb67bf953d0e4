"""The live view's HTML: the text so far, the latest rows only, each cell's exact weight, and the progress said."""
from __future__ import annotations

import re

import numpy as np

from attnscope.viz.live import LIVE_CHARS, LIVE_ROWS, LiveProgress, estimate, latest, live_html


def test_live_view_draws_the_latest_rows_with_their_weights() -> None:
    source = ["a", "b", "<eos>"]
    tokens = [f"t{i}" for i in range(LIVE_ROWS + 5)]
    rows = [np.array([0.5, 0.25, 0.25])] * len(tokens)
    page = live_html("t0 t1 <&>", source, tokens, rows, LiveProgress(len(tokens), 40, 0.34, 0.02))
    assert 'data-decoded="17"' in page and "t0 t1 &lt;&amp;&gt;" in page
    labels = re.findall(r'<th class="r">(\d+): (t\d+)</th>', page)
    assert labels == [(str(i), f"t{i}") for i in range(5, 17)]  # the latest LIVE_ROWS, numbered by step
    assert page.count('title="t16 → a: 0.5000"') == 1 and page.count("<td") == LIVE_ROWS * len(source)
    assert "token 17 of at most 40, 0.3 s so far (20 ms a token), at most about 0.5 s left" in page


def test_a_long_text_shows_its_end() -> None:
    assert latest("x" * LIVE_CHARS) == "x" * LIVE_CHARS
    assert latest("a" + "x" * LIVE_CHARS) == "…" + "x" * LIVE_CHARS


def test_before_the_first_token_the_view_has_no_rows() -> None:
    page = live_html("", ["a"], [], [], LiveProgress(0, 10, 0.01, 0.0))
    assert "<td" not in page and 'data-decoded="0"' in page


def test_estimate_is_the_budget_at_the_measured_cost() -> None:
    assert estimate(400, 0.025).startswith("Up to 400 output tokens: at most about 10 s at 25 ms a token")


def test_a_beam_search_says_its_steps_what_it_shows_and_what_stop_keeps() -> None:
    page = live_html("x y", ["a", "<eos>"], ["x", "y"], [np.array([0.5, 0.5])] * 2, LiveProgress(5, 40, 0.5, 0.08, beam=4))
    assert 'data-decoded="5"' in page and "best hypothesis" in page and page.count('<th class="r">') == 2
    assert ("Beam search (4 hypotheses): step 5 of at most 40, 0.5 s so far (80 ms a step), at most about 2.8 s left"
            in page)
    assert "Stop keeps it as the translation" in page
    assert estimate(400, 0.1, beam=4).startswith("Up to 400 steps of a beam of 4: at most about 40 s at 100 ms a step, "
                                                 "as measured for this model with this beam size")
