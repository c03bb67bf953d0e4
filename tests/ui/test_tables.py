"""Tables in words a student reads: every column has a name and a help, every config setting a meaning."""
from __future__ import annotations

import dataclasses

import pytest

from attnscope.model.config import ModelConfig
from attnscope.ui import tables
from attnscope.ui.anatomy_page import config_rows


def test_every_config_setting_is_explained() -> None:
    """A setting added to ModelConfig without a meaning fails here (and the Anatomy page would raise)."""
    assert set(tables.CONFIG_FIELDS) == {f.name for f in dataclasses.fields(ModelConfig)}
    rows = config_rows(ModelConfig(src_vocab_size=10, tgt_vocab_size=12, forced_first=None))
    assert [r["field"] for r in rows] == [f.name for f in dataclasses.fields(ModelConfig)]
    assert all(r["meaning"] for r in rows)
    assert {r["field"]: r["value"] for r in rows}["forced_first"] == ""  # "None" would read as a token


def test_a_column_without_a_readable_name_is_refused() -> None:
    with pytest.raises(ValueError, match="no readable name for column.*'loss'"):
        tables.config(["step", "loss"], tables.VALIDATIONS)
    shown = tables.config(["step", "BLEU"], tables.VALIDATIONS)
    assert set(shown) == {"step", "BLEU"}
