"""Gradient-based saliency of each generated token over the source and target-prefix embeddings.

f_t is the log-probability the model gave the token it generated at step t. Gradient × input
(Shrikumar et al. 2017; Denil et al. 2014) scores token j by sum_d x_jd ∂f_t/∂x_jd. Integrated
gradients (Sundararajan et al., "Axiomatic Attribution for Deep Networks", ICML 2017) average the
gradient along the straight path from a baseline (here: zero token embeddings, positions kept)
to the input, so the scores add up to f_t(x) − f_t(baseline) ("completeness"). The inputs are
the token embeddings the model's own embedding layers return (before scaling by √d and adding
positions); a forward hook swaps in the scaled copies, so the forward pass is the model's own.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from attnscope.engine.capture import eval_mode, model_lock
from attnscope.engine.internals import decoder_inputs
from attnscope.engine.translator import Translation, Translator
from attnscope.model.transformer import Transformer

MAX_STEPS = 512
CHUNK = 16  # path points per forward pass: bounds memory, keeps matmuls wide


@dataclass(frozen=True)
class Saliency:
    """Signed attributions of each generated token t over its inputs."""

    method: str  # "gradient × input" or "integrated gradients (n steps)"
    source: np.ndarray  # [T, S]
    prefix: np.ndarray  # [T, T] over decoder inputs <bos> y1 ..; zero after t (causal)
    score: np.ndarray  # [T] f_t(x): log-probability of the generated token
    baseline_score: np.ndarray  # [T] f_t at zero embeddings (integrated gradients' reference point)

    @property
    def total(self) -> np.ndarray:
        """[T] sum of all attributions (≈ score − baseline_score for integrated gradients)."""
        return self.source.sum(-1) + self.prefix.sum(-1)


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


def _hidden(model: Transformer, src: Tensor, tgt_in: Tensor, alphas: Tensor) -> tuple[Tensor, list[Tensor]]:
    """The output layer's input at each path point (A, T, D), and the scaled embeddings (source, target)."""
    a = len(alphas)
    kept: list[Tensor] = []
    grab = model.generator.register_forward_hook(lambda _m, args, _out: kept.append(args[0]))
    try:
        with scaled_embeddings(model, alphas.view(a, 1, 1).to(model.generator.weight.dtype)) as seen:
            model(src.expand(a, -1), tgt_in.expand(a, -1))
    finally:
        grab.remove()
    return kept[0], [scaled for _, scaled in seen] + [x for x, _ in seen]


def _log_prob(model: Transformer, hidden: Tensor, t: int, token: int) -> Tensor:
    """f_t at each path point, (A,): the output layer on row t only (its backward skips the other rows)."""
    return model.generator(hidden[:, t]).log_softmax(-1)[:, token]


def saliency(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int], steps: int | None = None) -> Saliency:
    """Gradient × input (`steps` None) or integrated gradients with `steps` path points (midpoint rule)."""
    if steps is not None and not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"integrated gradients needs between 1 and {MAX_STEPS} steps, got {steps}")
    device = model.generator.weight.device
    src = torch.tensor([list(src_ids)], device=device)
    tgt_in = torch.tensor([decoder_inputs(target_ids)], device=device)
    tokens = [int(i) for i in target_ids]
    alphas = torch.ones(1) if steps is None else (torch.arange(steps, dtype=torch.float64) + 0.5) / steps
    t = len(target_ids)
    with model_lock(model), eval_mode(model), torch.enable_grad():
        grads: list[Tensor] | None = None
        for chunk in alphas.split(CHUNK):
            hidden, (src_e, tgt_e, x_src, x_tgt) = _hidden(model, src, tgt_in, chunk.to(device))
            per_t = [torch.autograd.grad(_log_prob(model, hidden, i, tokens[i]).sum(), [src_e, tgt_e], retain_graph=i < t - 1)
                     for i in range(t)]
            summed = [torch.stack([g[k].sum(0) for g in per_t]) for k in range(2)]  # (T, S, D), (T, T, D)
            grads = summed if grads is None else [a + b for a, b in zip(grads, summed)]
        x_src, x_tgt = x_src[0], x_tgt[0]  # unscaled embeddings (S, D), (T, D)
        with torch.no_grad():
            hidden, _ = _hidden(model, src, tgt_in, torch.tensor([1.0, 0.0], device=device))
            ends = torch.stack([_log_prob(model, hidden, i, tokens[i]) for i in range(t)], dim=1)  # (2, T)
    n = len(alphas)
    source = (grads[0] / n * x_src).sum(-1)  # (T, S)
    prefix = (grads[1] / n * x_tgt).sum(-1)  # (T, T)
    method = "gradient × input" if steps is None else f"integrated gradients ({steps} steps)"
    as_np = lambda x: x.detach().double().cpu().numpy()  # noqa: E731
    return Saliency(method, as_np(source), as_np(prefix), as_np(ends[0]), as_np(ends[1]))


def translation_saliency(translator: Translator, translation: Translation, steps: int | None = None) -> Saliency:
    """Saliency of a translation's own output tokens (teacher-forced on its ids)."""
    with translator.inference():
        return saliency(translator.model, translation.source_ids, translation.target_ids, steps)
