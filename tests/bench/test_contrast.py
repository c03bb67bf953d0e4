"""The contrast bench row: every contrastive method timed on one step, with the load beside each figure."""
from __future__ import annotations

from attnscope.bench.contrast import contrast_step
from tests.engine_fixtures import tiny_translator


def test_a_row_times_every_contrastive_method_with_the_load() -> None:
    row = contrast_step(tiny_translator(0, eos_bias=2.0), "a b c d", 8, 2, "tiny")
    assert row["model"] == "tiny" and row["IG path points"] >= 16
    assert all("(" in row[f"{w} s wall / CPU (load)"] for w in ("first", "fastest", "median"))
