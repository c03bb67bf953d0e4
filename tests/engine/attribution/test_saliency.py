"""Saliency against finite differences, integrated gradients against a slow Riemann sum written here, and
their completeness."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from attnscope.engine.attribution.encoder_side import SOURCE_ROWS
from attnscope.engine.attribution.path_gradients import ROWS, path_pair, token_groups
from attnscope.engine.attribution.quadrature import IGSettings, integrate
from attnscope.engine.attribution.saliency import gradient_saliency, saliency, translation_saliency
from attnscope.engine.attribution.sentence import attribute, exact_contributions
from attnscope.engine.recording.trace import decoder_inputs
from tests.attribution_fixtures import T5_MODEL, pair, tiny
from tests.engine_fixtures import no_hooks_left, tiny_translator


def log_probs_with_hook(model, src, tgt, hook) -> np.ndarray:
    """f_t for every t, each embedding table's output passed through `hook` (a forward hook; a shared table once)."""
    handles = [m.register_forward_hook(hook) for m in {id(m): m for m in (model.src_embed, model.tgt_embed)}.values()]
    try:
        with torch.no_grad():
            logits = model(torch.tensor([src]), torch.tensor([decoder_inputs(tgt, model.config.bos_id)]))[0]
    finally:
        for h in handles:
            h.remove()
    return logits.log_softmax(-1)[torch.arange(len(tgt)), torch.tensor(tgt)].numpy()


def log_prob_with(model, src, tgt, side: int, j: int, factor: float) -> np.ndarray:
    """f_t for every t when token j's embedding on one side (0 source, 1 target) is multiplied by `factor`."""
    calls = []

    def hook(_m, _i, out):
        calls.append(1)
        if len(calls) - 1 == side:
            out = out.clone()
            out[:, j] *= factor
        return out

    return log_probs_with_hook(model, src, tgt, hook)


@pytest.mark.parametrize("shared", [False, True, "t5"])
def test_gradient_times_input_equals_finite_differences(shared: bool | str) -> None:
    kw = dict(share_embeddings=True, src_vocab_size=29) if shared is True else T5_MODEL if shared == "t5" else {}
    model = tiny(5, **kw)
    src, tgt = pair(5)
    got = saliency(model, src, tgt)
    eps = 1e-5
    for side, n in ((0, len(src)), (1, len(tgt))):
        for j in range(n):
            # d/de f(x with token j scaled by 1+e) at 0 is sum_d x_jd df/dx_jd: gradient × input of token j
            fd = (log_prob_with(model, src, tgt, side, j, 1 + eps) - log_prob_with(model, src, tgt, side, j, 1 - eps)) / (2 * eps)
            column = got.source[:, j] if side == 0 else got.prefix[:, j]
            np.testing.assert_allclose(column, fd, atol=1e-7)


def all_log_probs(model, src, tgt, factor: float) -> np.ndarray:
    """f_t for every t with every token embedding (source and target) multiplied by `factor`."""
    def scale(_m, _i, out):
        return out * factor

    return log_probs_with_hook(model, src, tgt, scale)


def gradient_x_input_at(model, src, tgt, alpha: float) -> np.ndarray:
    """Gradient × input at the path point alpha, one token at a time through the model's own full pass: [T, S + T]."""
    rows = []
    for t in range(len(tgt)):
        kept = []

        def scale(_m, _i, out, kept=kept):
            x = out.detach()
            leaf = (x * alpha).requires_grad_(True)
            kept.append((x, leaf))
            return leaf

        handles = [m.register_forward_hook(scale) for m in {model.src_embed, model.tgt_embed}]
        try:
            logits = model(torch.tensor([src]), torch.tensor([decoder_inputs(tgt, model.config.bos_id)]))[0]
        finally:
            for h in handles:
                h.remove()
        (x_s, e_s), (x_t, e_t) = kept
        g_s, g_t = torch.autograd.grad(logits.log_softmax(-1)[t, tgt[t]], [e_s, e_t])
        rows.append(torch.cat([(g_s * x_s)[0].sum(-1), (g_t * x_t)[0].sum(-1)]).double().numpy())
    return np.stack(rows)


def slow_integrated_gradients(model, src, tgt, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The midpoint rule, one path point and one token at a time: ([T, S], [T, T]) attributions."""
    total = sum(gradient_x_input_at(model, src, tgt, (k + 0.5) / steps) for k in range(steps)) / steps
    return total[:, : len(src)], total[:, len(src):]


def test_integrated_gradients_equal_a_slow_riemann_sum_on_a_smooth_model() -> None:
    model = tiny(6, activation="gelu")  # no ReLU kinks: the midpoint rule converges as 1/steps^2
    src, tgt = pair(6, n_src=4, n_tgt=3)
    got = saliency(model, src, tgt, IGSettings(tolerance=1e-6, floor=1e-3, max_points=512))
    assert got.complete.all()
    source, prefix = slow_integrated_gradients(model, src, tgt, steps=200)
    scale = max(np.abs(source).max(), np.abs(prefix).max())
    np.testing.assert_allclose(got.source, source, atol=1e-4 * scale)
    np.testing.assert_allclose(got.prefix, prefix, atol=1e-4 * scale)


@pytest.mark.parametrize("tolerance,t5", [(0.05, False), (0.002, False), (0.002, True)])
def test_integrated_gradients_are_complete_to_the_tolerance_asked(tolerance: float, t5: bool) -> None:
    model = tiny(6, **(T5_MODEL if t5 else {}))
    src, tgt = pair(6)
    settings = IGSettings(tolerance=tolerance, max_points=1024)
    ig = saliency(model, src, tgt, settings)
    score, baseline = all_log_probs(model, src, tgt, 1.0), all_log_probs(model, src, tgt, 0.0)  # computed here
    np.testing.assert_allclose(ig.score, score, atol=1e-12)
    np.testing.assert_allclose(ig.baseline_score, baseline, atol=1e-12)
    gap = np.abs(ig.source.sum(-1) + ig.prefix.sum(-1) - (score - baseline))
    np.testing.assert_allclose(ig.gap, gap, atol=1e-12)
    assert np.all(gap <= tolerance * np.maximum(np.abs(score - baseline), settings.floor)) and ig.complete.all()
    assert np.all(np.triu(ig.prefix, k=1) == 0)  # a token never depends on later decoder inputs
    assert ig.method == f"integrated gradients ({ig.points} path points)" and ig.points <= 1024


def test_a_small_budget_is_reported_as_incomplete() -> None:
    model = tiny(6)
    src, tgt = pair(6)
    ig = saliency(model, src, tgt, IGSettings(tolerance=1e-6, floor=1e-6, max_points=16))
    assert ig.points == 16 and not ig.complete.all()
    with pytest.raises(ValueError, match="only integrated gradients"):
        assert saliency(model, src, tgt).complete.all()


def test_one_step_is_the_gradient_at_half_the_input() -> None:
    model = tiny(7)
    src, tgt = pair(7)
    half = saliency(model, src, tgt, IGSettings(panels=1, nodes=1, max_points=1))  # one Gauss-Legendre node: alpha = 0.5
    calls = []

    def hook(_m, _i, out):
        calls.append(1)
        return out * 0.5

    handles = [m.register_forward_hook(hook) for m in (model.src_embed, model.tgt_embed)]
    try:
        emb = {}

        def grab(_m, _i, out):
            out.retain_grad()
            emb.setdefault("src" if "src" not in emb else "tgt", out)
        handles += [m.register_forward_hook(grab) for m in (model.src_embed, model.tgt_embed)]
        logits = model(torch.tensor([src]), torch.tensor([decoder_inputs(tgt, model.config.bos_id)]))[0]
        lp = logits.log_softmax(-1)[2, tgt[2]]
        lp.backward()
    finally:
        for h in handles:
            h.remove()
    x_src = emb["src"].detach() * 2  # the hook halved it
    np.testing.assert_allclose(half.source[2], (emb["src"].grad * x_src)[0].sum(-1).numpy(), atol=1e-10)


def test_translation_saliency_shapes_and_hooks_removed() -> None:
    tr = tiny_translator(0, eos_bias=2.0)
    result = tr.translate("a b c")
    sal = translation_saliency(tr, result, IGSettings(max_points=16))
    assert sal.source.shape == (len(result.target_ids), len(result.source_ids))
    assert sal.method == f"integrated gradients ({sal.points} path points)" and sal.points <= 16
    assert no_hooks_left(tr.model)


@pytest.mark.parametrize("t_max,n_alphas,rows", [(1, 1, 1), (7, 3, 1), (25, 16, 2048), (25, 1, 2048), (40, 16, 64)])
def test_token_groups_cover_every_token_once_within_the_rows(t_max: int, n_alphas: int, rows: int) -> None:
    groups = token_groups(t_max, n_alphas, rows)
    assert [t for lo, hi in groups for t in range(lo, hi)] == list(range(t_max))
    assert all(hi - lo == 1 or (hi - lo) * n_alphas * hi <= rows for lo, hi in groups)


def decoder_rows(groups: list[tuple[int, int]], n_alphas: int, group_rows: int) -> int:
    """Rows the backwards of these groups compute at n_alphas path points (a backward per token over its group's
    prefix; the forward is shared), with `group_rows` for each group."""
    return sum(n_alphas * (hi - lo) * hi + group_rows for lo, hi in groups)


@pytest.mark.parametrize("t_max,n_alphas,rows,group_rows", [(9, 1, 2048, 0), (9, 2, 24, 0), (10, 16, 2048, 0),
                                                            (9, 1, 2048, 40), (10, 16, 2048, 256)])
def test_token_groups_cost_the_least_of_every_split_within_the_rows(t_max: int, n_alphas: int, rows: int,
                                                                    group_rows: int) -> None:
    splits = []  # every way to cut 0..t_max-1 into consecutive groups (2^(t_max-1)), those within the rows kept
    for cuts in itertools.product((False, True), repeat=t_max - 1):
        ends = [t + 1 for t, cut in enumerate(cuts) if cut] + [t_max]
        groups = list(zip([0, *ends[:-1]], ends))
        if all(hi - lo == 1 or (hi - lo) * n_alphas * hi <= rows for lo, hi in groups):
            splits.append(groups)
    def cost(groups: list[tuple[int, int]]) -> int:
        return decoder_rows(groups, n_alphas, group_rows)

    assert cost(token_groups(t_max, n_alphas, rows, group_rows)) == min(map(cost, splits))


@pytest.mark.parametrize("model_kw,dtype,rows,source_rows,forward", [
    ({}, torch.float64, ROWS, SOURCE_ROWS, None), ({}, torch.float64, 1, SOURCE_ROWS, True),
    ({}, torch.float64, ROWS, 1, True),
    ({}, torch.float64, 40, SOURCE_ROWS, False), (T5_MODEL, torch.float64, 40, SOURCE_ROWS, True),
    (T5_MODEL, torch.float64, ROWS, SOURCE_ROWS, False),
    ({"share_embeddings": True, "src_vocab_size": 29}, torch.float32, ROWS, SOURCE_ROWS, None)])
def test_batched_gradients_equal_one_token_and_one_path_point_at_a_time(model_kw: dict, dtype: torch.dtype, rows: int,
                                                                         source_rows: int,
                                                                         forward: bool | None) -> None:
    """Path points in one pass (or one at a time: `source_rows` 1), the source side by forward or backward mode
    and the target tokens in batched backwards (over their own prefixes) give what one full pass and one
    backward per token and path point give, to the dtype's rounding."""
    model = tiny(8, **model_kw).to(dtype)
    src, tgt = pair(8, n_src=5, n_tgt=8)
    alphas = np.array([0.1, 0.45, 0.8, 1.0])
    got = path_pair(model, src, tgt).gradients(alphas, rows, source_rows=source_rows, forward=forward)
    want = np.stack([gradient_x_input_at(model, src, tgt, float(a)) for a in alphas])
    np.testing.assert_allclose(got, want, atol=(1e-12 if dtype == torch.float64 else 1e-6) * np.abs(want).max())


def test_integrated_gradients_report_the_completeness_of_one_at_a_time_gradients() -> None:
    """The adaptive rule on the batched gradients spends the same path points and reports the same
    f(x), f(baseline) and gaps as on gradients taken one token and one path point at a time."""
    model = tiny(9)
    src, tgt = pair(9)
    settings = IGSettings(tolerance=1e-3, max_points=256)
    ig = saliency(model, src, tgt, settings)

    def one_at_a_time(alphas: np.ndarray) -> np.ndarray:
        return np.stack([gradient_x_input_at(model, src, tgt, float(a)) for a in alphas])

    def values(alphas: np.ndarray) -> np.ndarray:
        return np.stack([all_log_probs(model, src, tgt, float(a)) for a in alphas])

    ref = integrate(one_at_a_time, values, settings)
    assert ig.points == ref.points > settings.panels * settings.nodes  # the rule refined, and the same way
    np.testing.assert_allclose(ig.score, ref.end, atol=1e-12)
    np.testing.assert_allclose(ig.baseline_score, ref.start, atol=1e-12)
    np.testing.assert_allclose(np.hstack([ig.source, ig.prefix]), ref.integral, atol=1e-12)
    np.testing.assert_allclose(ig.gap, np.abs(ref.integral.sum(-1) - (ref.end - ref.start)), atol=1e-12)


def test_gradient_x_input_from_the_first_round_of_integrated_gradients_equals_each_computed_alone() -> None:
    """One set of passes for both (the gradient at the input beside the first round's path points, f at the path's
    ends read once) gives what each method computes alone and what one token at a time at α = 1 gives; integrated
    gradients spend the same path points and report the same gaps."""
    model = tiny(10)
    src, tgt = pair(10, n_src=5, n_tgt=7)
    settings = IGSettings(tolerance=1e-3, max_points=256)
    gxi, ig = gradient_saliency(model, src, tgt, settings)
    alone_gxi, alone_ig = saliency(model, src, tgt), saliency(model, src, tgt, settings)
    one_at_a_time = gradient_x_input_at(model, src, tgt, 1.0)
    np.testing.assert_allclose(np.hstack([gxi.source, gxi.prefix]), one_at_a_time, atol=1e-12)
    for field in ("source", "prefix", "score", "baseline_score"):
        np.testing.assert_allclose(getattr(gxi, field), getattr(alone_gxi, field), atol=1e-12)
        np.testing.assert_allclose(getattr(ig, field), getattr(alone_ig, field), atol=1e-12)
    assert gxi.method == alone_gxi.method and ig.method == alone_ig.method and ig.points == alone_ig.points > 16
    np.testing.assert_allclose(ig.gap, alone_ig.gap, atol=1e-12)


def test_progress_names_each_stage_and_each_gradient_evaluation_reaches_its_end() -> None:
    tr = tiny_translator(0, eos_bias=2.0)
    result = tr.translate("a b c d e")
    heard: list[tuple[str, float]] = []
    settings = IGSettings(tolerance=1e-4, floor=1e-3, max_points=64)
    att = attribute(tr, result, settings, lambda what, done: heard.append((what, done)))
    stages = list(dict.fromkeys(what for what, _ in heard))
    assert stages[:3] == ["ALTI+ and value zeroing", "norm-based attention", "integrated gradients"]
    rounds = stages[3:]  # gradient × input's gradient rides with the first
    assert len(rounds) > 1 and all(s.startswith("integrated gradients: path points ") for s in rounds)
    assert rounds[0].endswith(" 1-16 (at most 64) and gradient × input")
    assert rounds[-1].endswith(f"-{att.integrated_gradients.points} (at most 64)")
    for stage in rounds:  # each gradient evaluation, from its start to its end
        done = [d for what, d in heard if what == stage]
        assert done == sorted(done) and done[0] == 0.0 and done[-1] == 1.0
    quiet = attribute(tr, result, settings)
    np.testing.assert_array_equal(att.integrated_gradients.source, quiet.integrated_gradients.source)


def test_alti_and_value_zeroing_computed_before_are_used_as_given() -> None:
    tr = tiny_translator(0, eos_bias=2.0)
    result = tr.translate("a b c d e")
    heard: list[str] = []
    exact = exact_contributions(tr, result)
    att = attribute(tr, result, progress=lambda what, _done: heard.append(what), exact=exact)
    assert att.alti_plus is exact[0] and att.value_zeroing is exact[1] and "ALTI+ and value zeroing" not in heard
    np.testing.assert_array_equal(att.value_zeroing.source, attribute(tr, result).value_zeroing.source)
