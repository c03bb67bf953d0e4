"""The Train page's status line says the run's epochs as its checkpoint's summary does."""
from __future__ import annotations

from pathlib import Path

from attnscope.training.config import TrainConfig
from attnscope.training.jobs import TrainJob
from attnscope.training.loop import TrainEvent
from attnscope.ui.train.progress import status_line


def test_the_status_gives_the_share_of_the_current_epoch(tmp_path: Path) -> None:
    job = TrainJob(TrainConfig(out_dir=str(tmp_path)), "a b", tmp_path)
    job.status = "stopped"
    job.events.append(TrainEvent("done", 1342, 16.93, 1344, 1.0, 1e-3, 5.0, 100.0))
    assert "step 1342/1344, epoch 16.93," in status_line(job)
    job.events.append(TrainEvent("done", 1344, 17.0, 1344, 1.0, 1e-3, 5.0, 100.0))
    assert "epoch 17," in status_line(job)
