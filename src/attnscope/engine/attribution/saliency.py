"""Gradient-based saliency of each generated token over the source and target-prefix embeddings.

f_t is the log-probability the model gave the token it generated at step t. Gradient × input
(Shrikumar et al. 2017; Denil et al. 2014) scores token j by sum_d x_jd ∂f_t/∂x_jd. Integrated
gradients (Sundararajan et al., "Axiomatic Attribution for Deep Networks", ICML 2017) average the
gradient along the straight path from a baseline (here: zero token embeddings, positions kept)
to the input, so the scores add up to f_t(x) − f_t(baseline) ("completeness"); the path integral
is taken by adaptive Gauss-Legendre quadrature until they do, within a tolerance the user sets
(engine/attribution/quadrature.py). The inputs are the token embeddings the model's own embedding layers
return (before scaling by √d and adding positions); a forward hook swaps in the scaled copies,
so the forward pass is the model's own.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from attnscope.engine.attribution.quadrature import IGSettings, integrate
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.recording.sharing import eval_mode
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.model.transformer import Transformer

CHUNK = 16  # path points per forward pass: bounds memory, keeps matmuls wide


GRADIENT_X_INPUT = "gradient × input"


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


@contextmanager
def scaled_embeddings(model: Transformer, scale: Tensor) -> Iterator[list[tuple[Tensor, Tensor]]]:
    """While the block runs, each embedding lookup returns scale (B, 1, 1) × embedding as a leaf that
    takes gradients. Yields (original, scaled) pairs in call order: the source first, then the target."""
    seen: list[tuple[Tensor, Tensor]] = []

    def swap(_m: torch.nn.Module, _i: object, out: Tensor) -> Tensor:
        x = out.detach()
        scaled = (x * scale).requires_grad_(True)
        seen.append((x, scaled))
        return scaled

    modules = {id(m): m for m in (model.src_embed, model.tgt_embed)}.values()
    handles = [m.register_forward_hook(swap) for m in modules]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


@dataclass(frozen=True)
class _Pair:
    """One source and its teacher-forced target on the model's device, with the tokens f_t explains."""

    model: Transformer
    src: Tensor  # (1, S)
    tgt_in: Tensor  # (1, T)
    tokens: list[int]

    def hidden(self, alphas: Tensor) -> tuple[Tensor, list[Tensor]]:
        """The output layer's input at each path point (A, T, D), and the scaled embeddings (source, target)
        then the unscaled ones."""
        kept: list[Tensor] = []
        generator = self.model.generator
        grab = generator.register_forward_hook(lambda _m, args, _out: kept.append(args[0]))
        try:
            with scaled_embeddings(self.model, alphas.view(-1, 1, 1).to(generator.weight)) as seen:
                self.model(self.src.expand(len(alphas), -1), self.tgt_in.expand(len(alphas), -1))
        finally:
            grab.remove()
        return kept[0], [scaled for _, scaled in seen] + [x for x, _ in seen]

    def log_prob(self, hidden: Tensor, t: int) -> Tensor:
        """f_t at each path point, (A,): the output layer on row t only (its backward skips the other rows)."""
        return self.model.generator(hidden[:, t]).log_softmax(-1)[:, self.tokens[t]]

    def values(self, alphas: np.ndarray) -> np.ndarray:
        """f at each path point, [A, T]."""
        with torch.no_grad():
            hidden, _ = self.hidden(torch.as_tensor(alphas, device=self.src.device))
            return torch.stack([self.log_prob(hidden, t) for t in range(len(self.tokens))], 1).double().cpu().numpy()

    def gradients(self, alphas: np.ndarray) -> np.ndarray:
        """Gradient × input at each path point, [A, T, S + T]: sum_d x_jd ∂f_t/∂x_jd at α x."""
        out = []
        t_max = len(self.tokens)
        for chunk in torch.as_tensor(alphas, device=self.src.device).split(CHUNK):
            with torch.enable_grad():
                hidden, (src_e, tgt_e, x_src, x_tgt) = self.hidden(chunk)
                rows = []
                for t in range(t_max):  # one backward per token: each row's gradient is its own path point's
                    g_src, g_tgt = torch.autograd.grad(self.log_prob(hidden, t).sum(), [src_e, tgt_e],
                                                       retain_graph=t < t_max - 1)
                    rows.append(torch.cat([(g_src * x_src).sum(-1), (g_tgt * x_tgt).sum(-1)], -1))  # (A, S + T)
            out.append(torch.stack(rows, 1).double().cpu().numpy())  # (A, T, S + T)
        return np.concatenate(out)


def _pair(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int]) -> _Pair:
    device = model.generator.weight.device
    return _Pair(model, torch.tensor([list(src_ids)], device=device),
                 torch.tensor([decoder_inputs(target_ids, model.config.bos_id)], device=device), [int(i) for i in target_ids])


def saliency(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int],
             ig: IGSettings | None = None) -> Saliency:
    """Gradient × input (`ig` None), or integrated gradients integrated to the completeness `ig` asks for."""
    pair, s = _pair(model, src_ids, target_ids), len(src_ids)
    with eval_mode(model):  # a shared model: under its lock, which the caller holds (translation_saliency)
        if ig is None:
            grad, ends = pair.gradients(np.ones(1))[0], pair.values(np.array([1.0, 0.0]))
            return Saliency(GRADIENT_X_INPUT, grad[:, :s], grad[:, s:], ends[0], ends[1])
        path = integrate(pair.gradients, pair.values, ig)
    return Saliency(f"integrated gradients ({path.points} path points)", path.integral[:, :s], path.integral[:, s:],
                    path.end, path.start, path.points, ig)


def translation_saliency(translator: Translator, translation: Translation, ig: IGSettings | None = None) -> Saliency:
    """Saliency of a translation's own output tokens (teacher-forced on its ids)."""
    with translator.inference():
        return saliency(translator.model, translation.source_ids, translation.target_ids, ig)
