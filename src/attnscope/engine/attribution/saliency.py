"""Gradient-based saliency of each generated token over the source and target-prefix embeddings.

f_t is the log-probability the model gave the token it generated at step t. Gradient × input
(Shrikumar et al. 2017; Denil et al. 2014) scores token j by sum_d x_jd ∂f_t/∂x_jd. Integrated
gradients (Sundararajan et al., "Axiomatic Attribution for Deep Networks", ICML 2017) average the
gradient along the straight path from a baseline (here: zero token embeddings, positions kept)
to the input, so the scores add up to f_t(x) − f_t(baseline) ("completeness"); the path integral
is taken by adaptive Gauss-Legendre quadrature until they do, within a tolerance the user sets
(engine/attribution/quadrature.py). The inputs are the token embeddings the model's own embedding layers
return (before scaling by √d and adding positions); a listener of their hook point swaps in the scaled copies,
so the forward pass is the model's own. The gradients at many path points at once: engine/attribution/path_gradients.py.
Where both methods are asked for, gradient × input (the gradient at α = 1) rides with integrated gradients' first
round of path points, and both read f at the path's two ends from one pass (`gradient_saliency`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from attnscope.engine.attribution.path_gradients import CHUNK, PathPair, path_pair
from attnscope.engine.attribution.quadrature import IGSettings, integrate
from attnscope.engine.attribution.registry import Inputs, Method
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.recording.sharing import eval_mode
from attnscope.model.transformer import Transformer

GRADIENT_X_INPUT = "gradient × input"
INTEGRATED = "integrated gradients"

Progress = Callable[[str, float], None]  # (what runs, the fraction of it done), called as it advances


@dataclass(frozen=True)
class Saliency:
    """Signed attributions of each generated token t over its inputs."""

    method: str  # "gradient × input" or "integrated gradients (n path points)"
    source: np.ndarray  # [T, S]
    prefix: np.ndarray  # [T, T] over decoder inputs <bos> y1 ..; zero after t (causal)
    score: np.ndarray  # [T] f_t(x): log-probability of the generated token
    baseline_score: np.ndarray  # [T] f_t at zero embeddings (integrated gradients' reference point)
    points: int = 1  # gradient evaluations (path points for integrated gradients)
    settings: IGSettings | None = None  # the completeness asked of integrated gradients

    @property
    def total(self) -> np.ndarray:
        """[T] sum of all attributions (≈ score − baseline_score for integrated gradients)."""
        return self.source.sum(-1) + self.prefix.sum(-1)

    @property
    def gap(self) -> np.ndarray:
        """[T] |total − (score − baseline_score)|: how far the attributions are from adding up (nats)."""
        return np.abs(self.total - (self.score - self.baseline_score))

    @property
    def relative_gap(self) -> np.ndarray:
        """[T] the gap as a fraction of the change in log-probability along the path."""
        change = np.abs(self.score - self.baseline_score)
        return self.gap / np.where(change > 0, change, np.inf)

    @property
    def complete(self) -> np.ndarray:
        """[T] whether each token met the tolerance of `settings` (integrated gradients only)."""
        if self.settings is None:
            raise ValueError("gradient × input makes no completeness claim; only integrated gradients do")
        return self.gap <= self.settings.allowed(self.score - self.baseline_score)


def _told(progress: Progress | None, what: str) -> Callable[[float], None] | None:
    return None if progress is None else lambda done: progress(what, done)


def saliency(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int],
             ig: IGSettings | None = None, progress: Progress | None = None) -> Saliency:
    """Gradient × input (`ig` None), or integrated gradients integrated to the completeness `ig` asks for;
    `progress` hears each gradient evaluation advance (integrated gradients: each round of path points)."""
    pair, s = path_pair(model, src_ids, target_ids), len(src_ids)
    with eval_mode(model):  # a shared model: under its lock, which the caller holds (translation_saliency)
        if ig is None:
            grad = pair.gradients(np.ones(1), done=_told(progress, GRADIENT_X_INPUT))[0]
            ends = pair.values(np.array([1.0, 0.0]))
            return Saliency(GRADIENT_X_INPUT, grad[:, :s], grad[:, s:], ends[0], ends[1])
        return _integrated(pair, s, ig, progress, with_input=False)[0]


def gradient_saliency(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int], ig: IGSettings,
                      progress: Progress | None = None) -> tuple[Saliency, Saliency]:
    """Gradient × input and integrated gradients (to `ig`) from one set of passes: the gradient at the input
    (α = 1) computed in the pass of integrated gradients' first round (it is not one of their path points), and
    f at the path's two ends read once for both."""
    pair, s = path_pair(model, src_ids, target_ids), len(src_ids)
    with eval_mode(model):  # a shared model: under its lock, which the caller holds
        ig_result, grad = _integrated(pair, s, ig, progress, with_input=True)
    return Saliency(GRADIENT_X_INPUT, grad[:, :s], grad[:, s:], ig_result.score, ig_result.baseline_score), ig_result


def _integrated(pair: PathPair, s: int, ig: IGSettings, progress: Progress | None,
                with_input: bool) -> tuple[Saliency, np.ndarray | None]:
    """Integrated gradients of a source of `s` tokens, and with `with_input` the gradient × input at α = 1
    [T, S + T], from the first round's pass."""
    if progress is not None:
        progress(INTEGRATED, 0.0)  # its first values, f at the path's two ends, come before any gradient
    spent, at_input = 0, []  # path points evaluated before this round; the gradient at the input once computed

    def gradients(alphas: np.ndarray) -> np.ndarray:
        nonlocal spent
        extra = [1.0] if with_input and not at_input else []
        what = f"{INTEGRATED}: path points {spent + 1}-{spent + len(alphas)} (at most {ig.max_points})"
        spent += len(alphas)
        if extra:
            what += f" and {GRADIENT_X_INPUT}"
        got = pair.gradients(np.concatenate([alphas, extra]), done=_told(progress, what), chunk=CHUNK + len(extra))
        at_input.extend(got[len(alphas):])
        return got[: len(alphas)]

    path = integrate(gradients, pair.values, ig)
    return (Saliency(f"{INTEGRATED} ({path.points} path points)", path.integral[:, :s], path.integral[:, s:],
                     path.end, path.start, path.points, ig), at_input[0] if with_input else None)


def translation_saliency(translator: Translator, translation: Translation, ig: IGSettings | None = None) -> Saliency:
    """Saliency of a translation's own output tokens (teacher-forced on its ids)."""
    with translator.inference():
        return saliency(translator.model, translation.source_ids, translation.target_ids, ig)


def _of(inputs: Inputs, ig: IGSettings | None) -> Saliency:
    t = inputs.translation
    return saliency(inputs.translator.model, t.source_ids, t.target_ids, ig, inputs.progress)


def _both(inputs: Inputs) -> tuple[Saliency, Saliency]:
    """Gradient × input and integrated gradients from one set of passes (gradient_saliency), computed for the first
    of the two methods that asks and kept in the inputs for the other."""
    if INTEGRATED not in inputs.shared:
        t = inputs.translation
        inputs.shared[INTEGRATED] = gradient_saliency(inputs.translator.model, t.source_ids, t.target_ids, inputs.ig,
                                                      inputs.progress)
    return inputs.shared[INTEGRATED]


ATTRIBUTIONS = (
    Method(GRADIENT_X_INPUT, "sum_d x_jd ∂f_t/∂x_jd of the generated token's log-probability f_t: a first-order "
                             "estimate", exact=False, cost="one backward pass per generated token (batched)", order=4,
           explanation="**Gradient × input.** The gradient of the generated token's log-probability with respect to "
                       "each input token embedding, times that embedding: a first-order estimate of how much the token "
                       "mattered (Shrikumar et al., 2017).",
           compute=lambda inputs: _of(inputs, None) if inputs.ig is None else _both(inputs)[0],
           source_map=lambda s, _layer: np.abs(s.source)),
    Method(INTEGRATED, "gradient × input averaged from zero embeddings to the real ones: adds up to f_t's change",
           exact=False, cost="at each path point (8 to 1,024, adaptive), one backward per generated token; "
                             "through the encoder, one forward-mode pass per source token where fewer", order=5,
           explanation="**Integrated gradients** (Sundararajan et al., \"Axiomatic Attribution for Deep "
                       "Networks\", ICML 2017). Gradients are averaged along the path from zero embeddings to the real "
                       "ones, so the attributions add up to the log-probability's change along that path; the path "
                       "integral is refined (adaptive Gauss-Legendre quadrature) until they do, within the tolerance "
                       "you set.",
           compute=lambda inputs: None if inputs.ig is None else _both(inputs)[1],
           source_map=lambda s, _layer: np.abs(s.source)),
)
