"""The table of parameter names is the model's: every name and shape it gives is a built Transformer's."""
from __future__ import annotations

import pytest

from attnscope.checkpoints.checkpoint import unique_state
from attnscope.model import parameters
from attnscope.model.config import ModelConfig
from attnscope.model.transformer import Transformer

VARIANTS = [
    {},
    {"positional": "learned", "norm": "pre", "share_embeddings": True, "src_vocab_size": 50},
    {"tie_embeddings": False, "final_norm": True, "n_encoder_layers": 2, "n_decoder_layers": 3},
    {"positional": "learned", "position_offset": 2, "separate_positions": True, "embed_norm": True, "qkv_bias": False},
]


def _config(variant: dict) -> ModelConfig:
    return ModelConfig(**{"src_vocab_size": 40, "tgt_vocab_size": 50, "d_model": 16, "n_heads": 2, "d_ff": 24,
                          "n_encoder_layers": 1, "n_decoder_layers": 1, **variant})


@pytest.mark.parametrize("variant", VARIANTS)
def test_expected_shapes_match_a_built_model(variant: dict) -> None:
    config = _config(variant)
    built = {k: tuple(v.shape) for k, v in unique_state(Transformer(config)).items()}
    assert parameters.expected_shapes(config) == built


def test_every_layer_part_is_a_module_of_the_model() -> None:
    model = Transformer(_config({"n_encoder_layers": 2, "n_decoder_layers": 2}))
    names = dict(model.named_modules())
    for side in parameters.SIDES:
        for role in parameters.LAYER_PARTS[side]:
            assert parameters.part(side, 1, role) in names, (side, role)
    assert {parameters.OUTPUT, parameters.OUTPUT_BIAS, parameters.TGT_EMBED} <= set(model.state_dict())
