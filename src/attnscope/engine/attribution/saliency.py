"""Gradient-based saliency of each generated token over the source and target-prefix embeddings.

f_t is the log-probability the model gave the token it generated at step t. Gradient × input
(Shrikumar et al. 2017; Denil et al. 2014) scores token j by sum_d x_jd ∂f_t/∂x_jd. Integrated
gradients (Sundararajan et al., "Axiomatic Attribution for Deep Networks", ICML 2017) average the
gradient along the straight path from a baseline (here: zero token embeddings, positions kept)
to the input, so the scores add up to f_t(x) − f_t(baseline) ("completeness"); the path integral
is taken by adaptive Gauss-Legendre quadrature until they do, within a tolerance the user sets
(engine/attribution/quadrature.py). The inputs are the token embeddings the model's own embedding layers
return (before scaling by √d and adding positions); a listener of their hook point swaps in the scaled copies,
so the forward pass is the model's own.

Path points ride on the batch dimension. Each generated token needs a backward of its own (f_t's gradient);
a group of tokens shares one forward over the decoder inputs they read (a causal decoder's rows do not depend
on later ones) and one backward batched over the tokens (vmap, `is_grads_batched`), each token seeded at its
own row with its output layer's gradient, which one backward through the output layer gives for all rows.
That backward stops at the encoder's output, which runs once per path point; engine/attribution/encoder_side.py
carries it on to the source tokens (forward mode along each source token when there are fewer of them).
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from attnscope.engine.attribution.encoder_side import SOURCE_ROWS, EncoderSide, encoder_side, forward_mode, path_chunk
from attnscope.engine.attribution.quadrature import IGSettings, integrate
from attnscope.engine.attribution.registry import Inputs, Method
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.recording.sharing import eval_mode
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.model.hooks import EMBED, FINAL
from attnscope.model.transformer import EncoderOutput, Transformer

CHUNK = 16  # path points per forward pass: bounds memory, keeps matmuls wide
ROWS = 2048  # decoder rows one batched backward carries (tokens × path points × prefix length): bounds its memory
GROUP_ROWS = 256  # decoder rows (× path points) one more group costs as much as: its own kernels and calls


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


@contextmanager
def scaled_embeddings(model: Transformer, scale: Tensor) -> Iterator[list[tuple[Tensor, Tensor]]]:
    """While the block runs, each embedding lookup (the EMBED hook point) returns scale (B, 1, 1) × embedding as a
    leaf that takes gradients. Yields (original, scaled) pairs in call order: the source first, then the target."""
    seen: list[tuple[Tensor, Tensor]] = []

    def swap(out: Tensor) -> Tensor:
        x = out.detach()
        scaled = (x * scale).requires_grad_(True)
        seen.append((x, scaled))
        return scaled

    with ExitStack() as listening:
        for stack in (model.encoder, model.decoder):
            stack.hooks.listen(listening, EMBED, swap)
        yield seen


def token_groups(t_max: int, n_alphas: int, rows: int, group_rows: int = GROUP_ROWS) -> list[tuple[int, int]]:
    """Target tokens lo..hi-1 whose gradients one backward computes, in order, each group within `rows`
    (tokens × path points × prefix length hi; one token at least), chosen to cost the fewest decoder rows in all:
    a group's forward reads hi rows at each path point (causal: its last token's prefix), its backward
    (hi - lo) × hi, and the group itself `group_rows`; the first tokens, which read short prefixes, share wide
    groups."""
    cost, start = [0] + [0] * t_max, [0] * (t_max + 1)  # the least cost of tokens 0..hi-1, and its last group's lo
    for hi in range(1, t_max + 1):
        widest = max(1, rows // (n_alphas * hi))  # tokens a group ending at hi may hold
        cost[hi], start[hi] = min((cost[lo] + n_alphas * (hi - lo + 1) * hi + group_rows, lo)
                                  for lo in range(max(0, hi - widest), hi))
    groups, hi = [], t_max
    while hi:
        groups.append((start[hi], hi))
        hi = start[hi]
    return groups[::-1]


@dataclass(frozen=True)
class _Pair:
    """One source and its teacher-forced target on the model's device, with the tokens f_t explains."""

    model: Transformer
    src: Tensor  # (1, S)
    tgt_in: Tensor  # (1, T)
    tokens: list[int]

    def hidden(self, alphas: Tensor, length: int,
               source: EncoderOutput | None = None) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """The last decoder layer's output (A, length, D) at each path point over the first `length` decoder
        inputs (a causal decoder computes the same rows as over all of them), and the (unscaled, scaled) embeddings
        the pass read: source then target, or the target only when `source` (the encoder's output) is given.
        The output layer runs on the last row only: log_probs() applies it."""
        kept: list[Tensor] = []
        model, n = self.model, len(alphas)
        scale = alphas.view(-1, 1, 1).to(model.generator.weight)
        with ExitStack() as listening, scaled_embeddings(model, scale) as seen:
            model.decoder.hooks.listen(listening, FINAL, kept.append)
            source = model.encode(self.src.expand(n, -1)) if source is None else source
            model.decode(self.tgt_in[:, :length].expand(n, -1), source, last_only=True)
        return kept[0], seen

    def log_probs(self, hidden: Tensor, first: int = 0) -> Tensor:
        """f_t at each path point (A, R) for the R rows of `hidden` (A, R, D), the first being target position
        `first`: the model's final norm and output layer, then the log-probability of each row's token."""
        logits = self.model.generator(self.model.decoder_norm(hidden)).log_softmax(-1)  # (A, R, V)
        tokens = torch.tensor(self.tokens[first: first + hidden.shape[1]], device=hidden.device)
        return logits.gather(-1, tokens.expand(len(hidden), -1).unsqueeze(-1)).squeeze(-1)

    def values(self, alphas: np.ndarray) -> np.ndarray:
        """f at each path point, [A, T]."""
        with torch.no_grad():
            hidden, _ = self.hidden(torch.as_tensor(alphas, device=self.src.device), len(self.tokens))
            return self.log_probs(hidden).double().cpu().numpy()

    def gradients(self, alphas: np.ndarray, rows: int = ROWS, done: Callable[[float], None] | None = None,
                  source_rows: int = SOURCE_ROWS, forward: bool | None = None) -> np.ndarray:
        """Gradient × input at each path point, [A, T, S + T]: sum_d x_jd ∂f_t/∂x_jd at α x; the target tokens
        in groups of at most `rows` decoder rows per batched backward, `done` told the fraction finished after each;
        the source side by forward mode or not (`forward`; None: whichever carries fewer, encoder_side.py)."""
        t_max, s, out = len(self.tokens), self.src.shape[1], []
        forward = forward_mode(s, t_max) if forward is None else forward
        chunks = torch.as_tensor(alphas, device=self.src.device).split(path_chunk(s, forward, CHUNK, source_rows))
        if done is not None:
            done(0.0)
        for c, chunk in enumerate(chunks):
            groups, side = [], encoder_side(self.model, self.src, chunk, forward)
            for lo, hi in token_groups(t_max, len(chunk), rows):
                groups.append(self._group(chunk, lo, hi, side))  # (A, hi - lo, S + T)
                if done is not None:
                    done((c * t_max + hi) / (len(chunks) * t_max))
            out.append(torch.cat(groups, 1))
        return torch.cat(out).double().cpu().numpy()

    def _group(self, alphas: Tensor, lo: int, hi: int, side: EncoderSide) -> Tensor:
        """Gradient × input of tokens lo..hi-1 at each path point, (A, hi - lo, S + T): one forward over the
        decoder inputs they read (0..hi-1), then one backward for all of them, batched over the tokens (vmap), to
        the target embeddings and the encoder's output, which `side` carries on to the source tokens."""
        with torch.enable_grad():
            memory = side.encoded.memory.detach().requires_grad_(True)
            hidden, [(x_tgt, tgt_e)] = self.hidden(alphas, hi, EncoderOutput(memory, side.encoded.mask))  # (A, hi, D)
            rows = hidden[:, lo:].detach().requires_grad_(True)
            (head,) = torch.autograd.grad(self.log_probs(rows, lo).sum(), rows)  # (A, hi - lo, D): row k is ∂f_lo+k/∂h_lo+k
            k = torch.arange(hi - lo, device=hidden.device)
            seeds = hidden.new_zeros(hi - lo, *hidden.shape)  # (hi - lo, A, hi, D): token lo+k's seed on its own row
            seeds[k, :, lo + k] = head.transpose(0, 1)
            # (hi - lo, A, *, D) each:
            g_memory, g_tgt = torch.autograd.grad(hidden, [memory, tgt_e], seeds, is_grads_batched=True)
        scores = torch.cat([side.scores(g_memory), (g_tgt * x_tgt).sum(-1)], -1)  # (hi - lo, A, S + hi)
        return torch.nn.functional.pad(scores, (0, len(self.tokens) - hi)).transpose(0, 1)  # causal: zero after hi


def _pair(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int]) -> _Pair:
    device = model.generator.weight.device
    return _Pair(model, torch.tensor([list(src_ids)], device=device),
                 torch.tensor([decoder_inputs(target_ids, model.config.bos_id)], device=device), [int(i) for i in target_ids])


def saliency(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int],
             ig: IGSettings | None = None, progress: Progress | None = None) -> Saliency:
    """Gradient × input (`ig` None), or integrated gradients integrated to the completeness `ig` asks for;
    `progress` hears each gradient evaluation advance (integrated gradients: each round of path points)."""
    pair, s = _pair(model, src_ids, target_ids), len(src_ids)

    def told(what: str) -> Callable[[float], None] | None:
        return None if progress is None else lambda done: progress(what, done)

    with eval_mode(model):  # a shared model: under its lock, which the caller holds (translation_saliency)
        if ig is None:
            grad, ends = pair.gradients(np.ones(1), done=told(GRADIENT_X_INPUT))[0], pair.values(np.array([1.0, 0.0]))
            return Saliency(GRADIENT_X_INPUT, grad[:, :s], grad[:, s:], ends[0], ends[1])
        if progress is not None:
            progress(INTEGRATED, 0.0)  # its first values, f at the path's two ends, come before any gradient
        spent = 0  # path points evaluated before this round

        def gradients(alphas: np.ndarray) -> np.ndarray:
            nonlocal spent
            what = f"{INTEGRATED}: path points {spent + 1}-{spent + len(alphas)} (at most {ig.max_points})"
            spent += len(alphas)
            return pair.gradients(alphas, done=told(what))

        path = integrate(gradients, pair.values, ig)
    return Saliency(f"{INTEGRATED} ({path.points} path points)", path.integral[:, :s], path.integral[:, s:],
                    path.end, path.start, path.points, ig)


def translation_saliency(translator: Translator, translation: Translation, ig: IGSettings | None = None) -> Saliency:
    """Saliency of a translation's own output tokens (teacher-forced on its ids)."""
    with translator.inference():
        return saliency(translator.model, translation.source_ids, translation.target_ids, ig)


def _of(inputs: Inputs, ig: IGSettings | None) -> Saliency:
    t = inputs.translation
    return saliency(inputs.translator.model, t.source_ids, t.target_ids, ig, inputs.progress)


ATTRIBUTIONS = (
    Method(GRADIENT_X_INPUT, "sum_d x_jd ∂f_t/∂x_jd of the generated token's log-probability f_t: a first-order "
                             "estimate", exact=False, cost="one backward pass per generated token (batched)", order=4,
           explanation="**Gradient × input.** The gradient of the generated token's log-probability with respect to "
                       "each input token embedding, times that embedding: a first-order estimate of how much the token "
                       "mattered (Shrikumar et al., 2017).",
           compute=lambda inputs: _of(inputs, None), source_map=lambda s, _layer: np.abs(s.source)),
    Method(INTEGRATED, "gradient × input averaged from zero embeddings to the real ones: adds up to f_t's change",
           exact=False, cost="at each path point (8 to 1,024, adaptive), one backward per generated token; "
                             "through the encoder, one forward-mode pass per source token where fewer", order=5,
           explanation="**Integrated gradients** (Sundararajan et al., \"Axiomatic Attribution for Deep "
                       "Networks\", ICML 2017). Gradients are averaged along the path from zero embeddings to the real "
                       "ones, so the attributions add up to the log-probability's change along that path; the path "
                       "integral is refined (adaptive Gauss-Legendre quadrature) until they do, within the tolerance "
                       "you set.",
           compute=lambda inputs: None if inputs.ig is None else _of(inputs, inputs.ig),
           source_map=lambda s, _layer: np.abs(s.source)),
)
