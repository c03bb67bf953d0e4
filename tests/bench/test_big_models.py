"""The big-models bench's app row (bench/big_models.app_pages): the served checkpoint's Translate and Step pages are
opened in headless Chromium until their heatmaps are drawn, with the errors either page shows and a screenshot of
each page's heatmaps."""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from attnscope.bench import big_models
from attnscope.bench.big_models import app_pages, child_run
from tests.support import CEILING, copy_toy_checkpoint, wait_for


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



def test_a_childs_peak_memory_is_its_own_not_its_parents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child's rusage would report this process's peak (Linux keeps it across exec); the bench's parent holds a
    model it just built, so the import it measures looked 2x the checkpoint's size. The child holds its 24 MB until
    the bench has read them."""
    read, release = [], tmp_path / "release"
    monkeypatch.setattr(big_models, "_high_water_kb", lambda pid, real=big_models._high_water_kb: read.append(real(pid))
                        or read[-1])
    os.mkfifo(release)  # the child's read blocks until the releaser opens it for writing: an event, not a clock
    code = f"x = bytearray(24 << 20)\nx[::4096] = b'1' * len(x[::4096])\nopen({str(release)!r}).read()"

    def release_once_read() -> None:
        try:
            wait_for(lambda: any(kb >= 24 << 10 for kb in read), "the child's peak to be read")
        finally:
            open(release, "w").close()  # released even so: the child must not wait forever

    releaser = threading.Thread(target=release_once_read)
    releaser.start()
    held = np.ones(64 << 20, dtype=np.uint8)  # 64 MB touched here, beside this process's own hundreds
    seconds, peak, cpu = child_run([sys.executable, "-S", "-c", code])
    releaser.join(CEILING)
    assert held.sum() == 64 << 20
    assert 24 / 1024 < peak < 60 / 1024 and seconds > 0 and cpu >= 0  # GB: its 24 MB and Python's own, not ours
    with pytest.raises(RuntimeError, match="(?s)failed: .*ZeroDivisionError"):
        child_run([sys.executable, "-S", "-c", "1 / 0"])
