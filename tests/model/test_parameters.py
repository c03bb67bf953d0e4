"""The table of parameter names is the model's: every name and shape it gives is a built Transformer's."""
from __future__ import annotations

from dataclasses import replace

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
    # T5 v1.0 and v1.1/mT5 (heads of their own width, relative bias tables, RMS norms, no biases, gated or not)
    {"positional": "relative", "relative_buckets": 8, "relative_max_distance": 16, "layer_norm": "rms", "norm": "pre",
     "qkv_bias": False, "out_bias": False, "ffn_bias": False, "scale_scores": False, "scale_output": True, "n_encoder_layers": 2},
    {"positional": "relative", "relative_buckets": 8, "relative_max_distance": 16, "layer_norm": "rms", "norm": "pre",
     "ffn": "gated", "activation": "gelu_tanh", "d_head": 12, "qkv_bias": False, "out_bias": False, "ffn_bias": False,
     "scale_scores": False, "tie_embeddings": False, "n_decoder_layers": 2},
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


@pytest.mark.parametrize("variant", VARIANTS)
def test_column_major_names_the_output_layers_stored_tensor_up_to_its_limit(variant: dict) -> None:
    """The name is the one the checkpoint stores the output layer's weight under (the tied embedding's), and an
    output layer past COLUMNS_LIMIT weights is left as stored."""
    config = _config(variant)
    model = Transformer(config)
    (name,) = parameters.column_major(config)
    assert unique_state(model)[name].data_ptr() == model.generator.weight.data_ptr()
    wide = parameters.COLUMNS_LIMIT // config.d_model + 1
    assert parameters.column_major(replace(config, src_vocab_size=wide, tgt_vocab_size=wide)) == set()
