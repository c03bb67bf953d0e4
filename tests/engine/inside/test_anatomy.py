"""Model anatomy: parameter counts per part (tied matrices once) and the shape walk-through."""
from __future__ import annotations

from attnscope.engine.inside.anatomy import layer_parts, parameter_table, shape_walkthrough
from tests.engine_fixtures import T5, tiny_model


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


def test_a_t5_layer_says_rms_norm_gated_feed_forward_and_what_it_lacks() -> None:
    """RMSNorm (no mean, no bias, a weight only), the gated feed-forward, unscaled scores plus the bias, no biases,
    heads of their own width; the paper's model keeps its LayerNorm and its 1/√d_head."""
    t5 = {row["part"].split(",")[0]: row for row in layer_parts(tiny_model(0, **T5).config)}
    assert t5["norm"]["computes"].startswith("RMSNorm") and "no mean subtracted and no bias" in t5["norm"]["computes"]
    assert t5["norm"]["learns"] == "g [D]" and "LayerNorm" not in " ".join(r["computes"] for r in t5.values())
    assert t5["feed-forward"]["computes"].startswith("gated") and "W_gate" in t5["feed-forward"]["learns"]
    assert "GELU (tanh" in t5["feed-forward"]["computes"] and "no biases" in t5["feed-forward"]["learns"]
    assert "Q·Kᵀ (not scaled) + position bias B" in t5["self-attention"]["computes"]
    assert "position bias" not in t5["cross-attention (decoder)"]["computes"]
    assert "[D, H·d_head], no biases" in t5["self-attention"]["learns"] and "no bias" in t5["self-attention"]["learns"]
    assert "table [8 buckets, H]" in t5["position bias (first layer of each stack)"]["learns"]
    paper = {row["part"].split(",")[0]: row for row in layer_parts(tiny_model(0).config)}
    assert paper["norm"]["computes"].startswith("LayerNorm") and paper["norm"]["learns"] == "g [D], b [D]"
    assert "Q·Kᵀ/√d_head" in paper["self-attention"]["computes"] and "+ b_O" in paper["self-attention"]["learns"]
    assert "position bias (first layer of each stack)" not in paper


def test_t5_shapes_say_what_the_model_computes() -> None:
    model = tiny_model(0, **T5)
    stages = list(shape_walkthrough(model, 5, 3)["stage"])
    assert "encoder self-attn: scores Q·Kᵀ (not scaled) + position bias B" in stages
    assert any("gated" in stage for stage in stages) and any("no positions added" in stage for stage in stages)
    concat = shape_walkthrough(model, 5, 3).set_index("stage").loc["encoder self-attn: weights · V, heads concatenated"]
    assert concat["shape"] == "[1, S, H·d_head]" and concat["this sentence"] == "1×5×24"  # 4 heads × 6, not d_model 16
