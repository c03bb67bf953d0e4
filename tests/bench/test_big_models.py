"""The big-models bench's app row (bench/big_models.app_pages): the served checkpoint's Translate and Step pages are
opened in headless Chromium until their heatmaps are drawn, with the errors either page shows and a screenshot of
each page's heatmaps."""
from __future__ import annotations

from pathlib import Path

from attnscope.bench.big_models import app_pages
from tests.support import copy_toy_checkpoint


def test_the_served_pages_draw_their_heatmaps_and_leave_the_checkpoint_where_it_was(tmp_path: Path) -> None:
    copy_toy_checkpoint(tmp_path)
    (path,) = tmp_path.glob("*.safetensors")
    shots = tmp_path / "shots"
    shots.mkdir()
    row = app_pages(path, "toy", shots)
    assert row["Translate: errors shown"] == [] and row["Step: errors shown"] == []
    assert row["Translate: server start to heatmaps s"] > 0 and row["Step: open to heatmaps s"] > 0
    assert 0 < row["app server peak RSS GB"] < 4
    assert sorted(p.name for p in shots.iterdir()) == ["toy-step.png", "toy-translate.png"]
    assert all(p.stat().st_size > 1000 for p in shots.iterdir()) and path.stat().st_nlink == 1  # its link removed
