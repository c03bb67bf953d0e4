"""Property-based: whatever a config.json, a model config or a vocabulary file holds, the answer is a valid object or
one attnscope error (CheckpointError, ConfigError), never another exception, and nothing accepted is out of range."""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.hf_config import TOKEN_IDS, check_config
from attnscope.checkpoints.importers.hf_models import OPTIONAL, SIZES
from attnscope.checkpoints.importers.vocab_files import load_vocabulary
from attnscope.model.config import MAX_LEN, ConfigError, ModelConfig

ANY = st.none() | st.booleans() | st.integers(-2, 10**11) | st.floats(allow_nan=True) | st.text(max_size=6) \
    | st.lists(st.integers(0, 9), max_size=3)
SMALL = st.integers(1, 64)
FIELDS = sorted({*SIZES, *OPTIONAL, *TOKEN_IDS})


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), ANY | SMALL, max_size=len(FIELDS)), st.dictionaries(st.sampled_from(
    list(SIZES)), SMALL, max_size=len(SIZES)))
def test_a_config_json_is_accepted_only_with_every_number_in_range(values: dict[str, Any], base: dict[str, int]) -> None:
    config = {**base, **values}
    try:
        check_config(config, "m", SIZES, OPTIONAL)
    except CheckpointError as err:
        assert str(err).startswith("config.json of m has")
        return
    for name, limit in {**SIZES, **{k: v for k, v in OPTIONAL.items() if config.get(k) is not None}}.items():
        assert not isinstance(config[name], bool) and 1 <= config[name] <= limit and float(config[name]).is_integer()
    for name in TOKEN_IDS:
        assert config.get(name) is None or 0 <= config[name] < config["vocab_size"]


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len",
                                        "n_encoder_layers", "positional", "norm_eps", "suppressed", "position_offset",
                                        "decoder_start", "share_embeddings", "x"]), ANY | SMALL, max_size=10))
def test_a_model_config_from_a_file_is_valid_or_one_config_error(data: dict[str, Any]) -> None:
    try:
        config = ModelConfig.from_json(json.dumps(data))
    except ConfigError:
        return
    assert 1 <= config.max_len <= MAX_LEN and config.d_model % config.n_heads == 0


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | st.lists(st.text(max_size=5), max_size=8).map(lambda t: json.dumps(t).encode())
       | st.lists(st.text(alphabet="ab<>/sunkpd \n", max_size=6), max_size=10).map(lambda t: "\n".join(t).encode())
       | st.recursive(st.text(max_size=4) | st.integers(), lambda c: st.dictionaries(st.sampled_from(
           ["model", "vocab", "type", "added_tokens", "unk_token"]), c, max_size=4), max_leaves=12).map(
           lambda d: json.dumps(d).encode()))
def test_any_vocabulary_file_gives_a_vocabulary_or_one_checkpoint_error(data: bytes) -> None:
    try:
        vocab = load_vocabulary(data, "v.txt")
    except CheckpointError:
        return
    assert vocab.size >= 1


def test_a_deeply_nested_vocabulary_is_one_checkpoint_error() -> None:
    with pytest.raises(CheckpointError, match=r"v.json looks like JSON but does not parse \(nested 100,000 levels deep"):
        load_vocabulary(b"[" * 100_000 + b"]" * 100_000, "v.json")
