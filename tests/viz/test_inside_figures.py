"""Figures of one head: the numbers drawn are the HeadView's, titles name the paper's equations."""
from __future__ import annotations

import numpy as np
import pytest

from attnscope.engine.head_view import head_view
from attnscope.engine.lens import logit_lens
from attnscope.engine.offsets import fit_offset_map, rotation_check
from attnscope.model.transformer import sinusoidal_table
from attnscope.viz import inside
from attnscope.viz.lens import lens_heatmap
from attnscope.viz.offsets import offset_fit_curves, rotation_circle, rotation_errors
from tests.engine.inside_fixtures import make_case


@pytest.fixture(scope="module")
def case():
    return make_case("post-sinusoidal")


def view_of(case, kind: str, query: int = 2):
    src, tgt = tuple(f"s{i}" for i in case.source), tuple(f"t{i}" for i in case.prefix)
    return head_view(case.cached, kind, 1, 2, query, src, tgt)


def title(fig) -> str:
    return fig.layout.title.text.replace("<br>", " ")


def z(fig) -> np.ndarray:
    return np.asarray(fig.data[0].z, dtype=float)


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_strips_draw_the_captured_vectors(case, kind: str) -> None:
    v = view_of(case, kind)
    assert np.allclose(z(inside.qk_strips(v)), np.vstack([v.q, v.k]))
    assert np.allclose(z(inside.product_strips(v)), v.products)
    assert np.allclose(z(inside.value_strips(v)), np.vstack([v.v, v.weighted, v.head_output]))
    assert np.allclose(z(inside.contribution_strips(v)), np.vstack([v.contributions, v.out_bias, v.attention_output]))
    assert np.allclose(z(inside.head_slices(v))[0], v.concat)
    assert np.allclose(z(inside.key_input_strips(v)), v.key_inputs)
    assert np.allclose(z(inside.input_strips(v))[2], v.embedding.total)
    sums = np.asarray(inside.product_strips(v).data[0].customdata)[:, 0]
    assert sums == pytest.approx(v.dots, abs=1e-5)
    assert list(inside.qk_strips(v).data[0].y)[1:] == [f"k  {i}: {t}" for i, t in enumerate(v.key_tokens)]


def test_score_steps_show_minus_infinity_and_the_softmax_row(case) -> None:
    v = view_of(case, "decoder", query=1)
    fig = inside.score_steps(v)
    text = np.asarray(fig.data[0].text)
    assert list(text[2, 2:]) == ["−∞"] * (len(v.key_tokens) - 2)
    assert [float(x) for x in text[3, :2]] == pytest.approx(v.weights[:2], abs=1e-3)
    assert "Eq. 1" in title(fig)
    bars = inside.weight_bars(v)
    assert np.array_equal(np.asarray(bars.data[0].y), v.weights)
    assert "softmax" in title(bars)


def test_mask_matrix_is_causal_for_the_decoder_only(case) -> None:
    dec, enc = inside.mask_matrix(view_of(case, "decoder")), inside.mask_matrix(view_of(case, "encoder"))
    assert np.array_equal(z(dec), np.triu(np.ones_like(z(dec)), 1)) and "causal" in title(dec)
    assert not z(enc).any() and "no mask" in title(enc)


def test_head_slices_mark_each_head(case) -> None:
    v = view_of(case, "cross")
    fig = inside.head_slices(v)
    assert len(fig.layout.shapes) == v.n_heads
    assert fig.layout.shapes[v.head].line.color == "crimson"
    assert (fig.layout.shapes[v.head].x0, fig.layout.shapes[v.head].x1) == (v.head_slice[0] - 0.5, v.head_slice[1] - 0.5)
    assert "Concat" in title(fig) and "W^O" in title(fig)


@pytest.mark.parametrize("variant, words", [("post-sinusoidal", "LayerNorm(x + Sublayer(x))"),
                                            ("pre-learned", "x + Sublayer(LayerNorm(x))")])
def test_residual_block_follows_the_norm(variant: str, words: str) -> None:
    c = make_case(variant)
    v = head_view(c.cached, "decoder", 0, 0, 1, tuple(map(str, c.source)), tuple(map(str, c.prefix)))
    fig = inside.residual_strips(v)
    assert words in title(fig)
    assert np.allclose(z(fig)[-1], v.block_output)


def test_lens_heatmap_marks_the_chosen_token(case) -> None:
    lens = logit_lens(case.model, case.cached, 1, case.decoded.ids[1], k=3)
    fig = lens_heatmap(lens, lambda i: f"w{i}")
    assert np.allclose(z(fig), lens.top_probs)
    assert fig.data[0].text[-1][0] == f"◆ w{case.decoded.ids[1]}"
    assert fig.layout.yaxis.ticktext[-1].startswith("layer 2 (output)")


def test_rotation_figures() -> None:
    check = rotation_check(sinusoidal_table(48, 16).numpy(), 4)
    circle = rotation_circle(check, 1)
    assert np.allclose(np.asarray(circle.data[2].x), check.predicted[:, 2])
    assert "Section 3.5" in title(circle)
    assert np.allclose(np.asarray(rotation_errors(check).data[0].y), np.maximum(check.pair_errors, 1e-12))
    with pytest.raises(ValueError, match="between 0 and 7"):
        rotation_circle(check, 8)
    curves = offset_fit_curves([1, 2], {"sinusoidal": np.array([1e-7, 2e-7])})
    assert list(curves.data[0].y) == [1e-7, 2e-7]
    assert fit_offset_map(sinusoidal_table(48, 16).numpy(), 2).relative_error < 1e-5
