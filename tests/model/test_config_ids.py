"""The special tokens' ids are config fields: defaults are attnscope's own ids, others are checked and used."""
from __future__ import annotations

import pytest

from attnscope.model.config import ConfigError, ModelConfig


def test_the_defaults_are_attnscopes_ids_and_older_configs_get_them() -> None:
    config = ModelConfig.from_dict({"src_vocab_size": 10, "tgt_vocab_size": 12})
    assert (config.pad_id, config.bos_id, config.eos_id, config.unk_id) == (0, 1, 2, 3)


def test_the_source_is_framed_with_the_configs_own_ids() -> None:
    config = ModelConfig(src_vocab_size=10, tgt_vocab_size=10, source_framing="bos-eos", pad_id=1, bos_id=0, eos_id=2,
                         unk_id=3)
    assert config.frame_source([5, 6]) == [0, 5, 6, 2]


@pytest.mark.parametrize("ids, message", [
    (dict(pad_id=2), "not distinct"),
    (dict(unk_id=10), "not a token id below 10"),
    (dict(eos_id=-1), "not a token id"),
])
def test_bad_special_ids_are_one_config_error(ids: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelConfig(src_vocab_size=10, tgt_vocab_size=12, **ids)


def test_bos_may_be_the_padding_token() -> None:
    config = ModelConfig(src_vocab_size=10, tgt_vocab_size=12, bos_id=0, decoder_start=0)  # Marian starts on <pad>
    assert config.bos_id == config.pad_id
