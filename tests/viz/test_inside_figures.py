"""Views of one head: the numbers shown are the HeadView's, titles name the paper's equations."""
from __future__ import annotations

import functools
import re

import numpy as np
import pytest

from attnscope.engine.inside.head_view import head_view
from attnscope.engine.inside.lens import logit_lens
from attnscope.engine.inside.offsets import fit_offset_map, rotation_check
from attnscope.model.positions import sinusoidal_table
from attnscope.viz import inside
from attnscope.viz.html import diverging_colours
from attnscope.viz.lens import lens_table
from attnscope.viz.offsets import offset_fit_curves, rotation_circle, rotation_errors
from tests.engine.inside.inside_fixtures import make_case
from tests.support import HtmlView, painted


@pytest.fixture(scope="module")
def case():
    return make_case("post-sinusoidal")


def view_of(case, kind: str, query: int = 2):
    src, tgt = tuple(f"s{i}" for i in case.source), tuple(f"t{i}" for i in case.prefix)
    return head_view(case.cached, kind, 1, 2, query, src, tgt)


def title(fig) -> str:
    return fig.layout.title.text.replace("<br>", " ")


def shown(markup: str) -> HtmlView:
    return HtmlView(markup)


def painted_like(markup: str, want: np.ndarray) -> bool:
    """Whether a view paints exactly the colours of `want` (rows of vectors) on its diverging scales:
    one for all rows of up to WIDE dimensions, one per row (band) beyond."""
    want = np.asarray(want, dtype=np.float32)
    if want.shape[1] > inside.WIDE:
        expected = [diverging_colours(row, float(np.abs(row).max())) for row in want]
    else:
        expected = diverging_colours(want, float(np.abs(want).max()))
    return [row.painted() for row in shown(markup).body_rows()] == [list(r) for r in expected]


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_strips_draw_the_captured_vectors(case, kind: str) -> None:
    v = view_of(case, kind)

    def exact(markup: str, want: np.ndarray) -> bool:
        return np.allclose(shown(markup).matrix(), want, atol=5e-5)  # the strips show 4 decimals

    # d_k-wide strips: one cell per dimension, its value on hover
    assert exact(inside.qk_strips(v), np.vstack([v.q, v.k]))
    assert exact(inside.product_strips(v), v.products)
    assert exact(inside.value_strips(v), np.vstack([v.v, v.weighted, v.head_output]))
    # d_model-wide strips: the same colours, as bands
    assert painted_like(inside.contribution_strips(v), np.vstack([v.contributions, v.out_bias, v.attention_output]))
    assert painted_like(inside.key_input_strips(v), v.key_inputs)
    assert painted_like(inside.input_strips(v), np.stack([v.embedding.token_embedding * v.embedding.scale,
                                                          v.embedding.position, v.embedding.total, v.layer_input,
                                                          v.query_input]))
    assert not painted_like(inside.key_input_strips(v), v.key_inputs[::-1])  # the check can fail
    sums = [float(row.tail.removeprefix("Σ = ")) for row in shown(inside.product_strips(v)).body_rows()]
    assert sums == pytest.approx(v.dots, abs=1e-4)
    assert [row.label for row in shown(inside.qk_strips(v)).body_rows()][1:] == [
        f"k  {i}: {t}" for i, t in enumerate(v.key_tokens)]


def test_long_vectors_are_bands_with_norm_and_extremes_on_hover() -> None:
    rows = np.random.default_rng(0).normal(size=(2, inside.WIDE + 36)).astype(np.float32)
    view = shown(inside.strips(rows, ["a", "b"], title="t"))
    out = rows[1]
    assert [len(row.hovers) for row in view.body_rows()] == [1, 1]  # one band per vector
    assert view.body_rows()[1].hovers[0] == (
        f"dimensions 0…{out.size - 1}: norm {np.linalg.norm(out):.4f}, "
        f"min {out.min():.4f} (dim {out.argmin()}), max {out.max():.4f} (dim {out.argmax()})")
    assert painted_like(inside.strips(rows, ["a", "b"], title="t"), rows)


def test_a_band_of_small_values_uses_the_full_colour_range_and_shows_it() -> None:
    """Next to a band of large values, one of values 10,000 times smaller is not left white: each band has
    its own colour scale, written beside it."""
    rng = np.random.default_rng(1)
    large, small = rng.normal(size=(2, inside.WIDE + 36)).astype(np.float32) * np.float32([[10.0], [0.001]])
    markup = inside.strips(np.stack([large, small]), ["large", "small"], title="t")
    view = shown(markup)
    ends = set(diverging_colours(np.array([-1.0, 1.0]), 1.0))  # the scale's darkest blue and red
    for row, values in zip(view.body_rows(), (large, small)):
        limit = float(np.abs(values).max())
        assert row.tail == f"±{limit:.3g}"  # the band's range, beside it
        painted = row.painted()
        assert painted[int(np.abs(values).argmax())] in ends  # its largest value takes the end of the scale
        assert len(set(painted)) > 20  # and the band is not one pale colour
    assert "each band on its own scale" in " ".join(view.texts)
    shared = diverging_colours(small, float(np.abs(large).max()))  # what one shared scale painted
    assert len(set(shared)) < 3  # (near white: why the scale is per band)


def test_strips_refuse_labels_that_do_not_fit() -> None:
    with pytest.raises(ValueError, match="must be distinct"):
        inside.strips(np.zeros((2, 3)), ["a", "a"], title="t")
    with pytest.raises(ValueError, match=r"\[2, 3\] vectors for 1 labels"):
        inside.strips(np.zeros((2, 3)), ["a"], title="t")


def test_score_steps_show_minus_infinity_and_the_softmax_row(case) -> None:
    v = view_of(case, "decoder", query=1)
    view = shown(inside.score_steps(v))
    rows = view.body_rows()
    assert rows[2].texts[2:] == ["−∞"] * (len(v.key_tokens) - 2)
    assert rows[3].values()[:2] == pytest.approx(v.weights[:2], abs=1e-6)  # hover: 6 decimals
    assert rows[0].values() == pytest.approx(v.dots, abs=1e-6)
    assert "Eq. 1" in view.title
    bars = shown(inside.weight_bars(v))
    assert np.allclose([float(h.rsplit(" ", 1)[1]) for h in bars.hovers], v.weights, atol=1e-6)
    assert "softmax" in bars.title and bars.rows[2].texts[-1] == "masked"


def test_mask_matrix_is_causal_for_the_decoder_only(case) -> None:
    dec, enc = shown(inside.mask_matrix(view_of(case, "decoder"))), shown(inside.mask_matrix(view_of(case, "encoder")))
    masked = np.array([[t == "−∞" for t in row.texts] for row in dec.body_rows()])
    assert np.array_equal(masked, np.triu(np.ones_like(masked), 1)) and "causal" in dec.title
    assert not enc.body_rows() and "no mask" in enc.title  # a sentence, not a matrix of zeros to scroll through
    assert "all zeros" in inside.mask_matrix(view_of(case, "encoder"))


def test_head_slices_mark_each_head(case) -> None:
    v = view_of(case, "cross")
    markup = inside.head_slices(v)
    view = shown(markup)
    d_head = v.head_output.size
    parts = v.concat.astype(np.float32).reshape(v.n_heads, d_head)
    limits = np.abs(parts).max(1)
    assert [t for t in view.texts if t.startswith("head ")] == [f"head {h} · ±{m:.3g}" for h, m in enumerate(limits)]
    assert [h.split(":")[0] for h in view.hovers] == [f"head {h}" for h in range(v.n_heads)]
    assert view.hovers[v.head].startswith(f"head {v.head}: dimensions {v.head_slice[0]}…{v.head_slice[1] - 1}")
    assert markup.count('class="hb on"') == 1 and f'<span class="hb on"><span class="hn">head {v.head} ·' in markup
    expected = [c for part, m in zip(parts, limits) for c in diverging_colours(part, float(m))]  # a scale per head
    bands = re.findall(r'class="hg" style="([^"]*)"', markup)
    assert [c for band in bands for c in painted(band)] == expected
    assert len(expected) == v.n_heads * d_head
    assert "Concat" in view.title and "W^O" in view.title


@pytest.mark.parametrize("variant, words", [("post-sinusoidal", "LayerNorm(x + Sublayer(x))"),
                                            ("pre-learned", "x + Sublayer(LayerNorm(x))")])
def test_residual_block_follows_the_norm(variant: str, words: str) -> None:
    c = make_case(variant)
    v = head_view(c.cached, "decoder", 0, 0, 1, tuple(map(str, c.source)), tuple(map(str, c.prefix)))
    assert words in shown(inside.residual_strips(v)).title
    rows = {"post": [v.residual, v.attention_output, v.norm_input, v.block_output],
            "pre": [v.residual, v.norm_output, v.attention_output, v.block_output]}[v.norm]
    assert painted_like(inside.residual_strips(v), np.stack(rows))


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_a_t5_head_shows_its_own_arithmetic(kind: str) -> None:
    """T5: q·k unscaled, then its head's position bias (self-attention only), mask, softmax; RMSNorm; no b^O; no
    positional encoding added to the embeddings. The cells are the HeadView's numbers."""
    c = t5_case()
    v = head_view(c.cached, kind, 1, 2, 2, tuple(map(str, c.source)), tuple(map(str, c.prefix)))
    view = shown(inside.score_steps(v))
    labels = [row.label for row in view.body_rows()]
    self_attention = kind != "cross"
    assert not any("√d_k" in label for label in labels) and ("QKᵀ / √d_k" not in view.title)
    assert any("position bias" in label for label in labels) == self_attention
    assert ("softmax(QKᵀ + B)" if self_attention else "softmax(QKᵀ)") in view.title
    rows = view.body_rows()
    if self_attention:
        live = ~v.masked
        assert np.allclose(np.array(rows[1].values())[live], (v.dots + v.bias)[live], atol=1e-6)
    assert rows[-1].values() == pytest.approx(v.weights, abs=1e-6) and rows[-1].values() == pytest.approx(
        v.recomputed_weights, abs=1e-6)
    contributions = shown(inside.contribution_strips(v))
    assert "bias b^O" not in [row.label for row in contributions.body_rows()] and "no bias" in contributions.title
    assert "RMSNorm" in shown(inside.residual_strips(v)).title and "LayerNorm" not in shown(inside.residual_strips(v)).title
    inputs = shown(inside.input_strips(v))
    assert "no positional encoding" in inputs.title and "RMSNorm of the block input" in inputs.body_rows()[-1].label
    assert "own width" in shown(inside.head_slices(v)).title  # 4 heads × 6 in d_model 16


@functools.cache
def t5_case():
    return make_case("t5")


def test_lens_table_marks_the_chosen_token(case) -> None:
    lens = logit_lens(case.model, case.cached, 1, case.decoded.ids[1], k=3)
    view = shown(lens_table(lens, lambda i: f"w{i}"))
    assert np.allclose(view.matrix(), lens.top_probs, atol=5e-5)
    assert view.body_rows()[-1].texts[0] == f"◆ w{case.decoded.ids[1]}"
    assert view.body_rows()[-1].label.startswith("layer 2 (output)")


def test_views_escape_tokens(case) -> None:
    src, tgt = ("<script>", *(f"s{i}" for i in case.source[1:])), tuple(f"t{i}" for i in case.prefix)
    v = head_view(case.cached, "encoder", 0, 0, 0, src, tgt)
    for build in inside.PANELS:
        assert "<script>" not in build(v)


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
