"""docs/training.md's toy command line is the Train page's toy preset, so its claim is about the defaults."""
from __future__ import annotations

import re
import shlex

from attnscope.cli.train import parse_args
from attnscope.model.config import PRESETS
from attnscope.training.toy import TOY_MODEL, TOY_SCHEDULE
from tests.support import ROOT


def documented_toy_command() -> list[str]:
    """The arguments of docs/training.md's `python -m attnscope train --out runs/toy ...` (continued lines joined)."""
    text = (ROOT / "docs" / "training.md").read_text()
    found = re.search(r"python -m attnscope train (--out runs/toy .*?)#", text.replace("\\\n", " "))
    assert found, "docs/training.md shows the toy preset's command line"
    return shlex.split(found[1])


def test_the_documented_toy_command_is_the_train_pages_toy_preset() -> None:
    config = parse_args(documented_toy_command())
    assert config.task == "reverse" and config.preset == "toy"
    assert PRESETS["toy"] | config.model == PRESETS["toy"] | TOY_MODEL
    assert {key: getattr(config, key) for key in TOY_SCHEDULE} == TOY_SCHEDULE
    assert config.seed == 1 and config.patience is None
