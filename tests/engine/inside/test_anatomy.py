"""Model anatomy: parameter counts per part (tied matrices once) and the shape walk-through."""
from __future__ import annotations

from attnscope.engine.inside.anatomy import parameter_table, shape_walkthrough
from tests.engine_fixtures import tiny_model


def test_parameters_per_part_add_up_to_the_model_counting_tied_matrices_once() -> None:
    model = tiny_model(0, tie_embeddings=True, share_embeddings=True)
    table = parameter_table(model)
    assert list(table.columns) == ["module", "parameters"]
    assert int(table["parameters"].sum()) == sum(p.numel() for p in model.parameters())  # parameters() dedups ties
    assert list(table["module"]) == ["tgt_embed", "encoder.0", "encoder.1", "decoder.0", "decoder.1", "decoder.2",
                                     "generator"]  # the shared embedding once; sinusoidal positions have no weights


def test_shape_walkthrough_counts_the_values_of_each_stage() -> None:
    model = tiny_model(0)
    frame = shape_walkthrough(model, 5, 3)
    weights = frame[frame.stage == "cross-attn: weights"].iloc[0]
    assert weights["this sentence"] == f"1×{model.config.n_heads}×3×5" and weights["values"] == model.config.n_heads * 15
