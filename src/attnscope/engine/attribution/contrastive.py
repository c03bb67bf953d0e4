"""Why this token and not that one: gradient attributions of the log-probability difference between the token a step
chose and a foil (Yin & Neubig, "Interpreting Language Models with Contrastive Explanations", EMNLP 2022; Inseq's
`contrast_prob_diff` step function with logprob=True).

At step t both continuations read the same prefix y_<t, so f = log p(y_t | x, y_<t) − log p(foil | x, y_<t) is one
number of one forward pass. Its gradient × input and integrated gradients are taken over the source token embeddings
and the decoder inputs step t reads (<bos> y_1 .. y_t-1), as saliency.py does for the token alone: the same inputs
(the token embeddings the model's embedding layers return, positions kept), the same zero baseline, the same adaptive
Gauss-Legendre quadrature (quadrature.py), so integrated gradients add up to f(x) − f(baseline) within the tolerance
asked. Results are `Saliency` objects of one row (the step), which every completeness check already reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from attnscope.engine.attribution.path_gradients import scaled_embeddings
from attnscope.engine.attribution.quadrature import CHUNK, IGSettings, integrate
from attnscope.engine.attribution.registry import CONTRAST, Inputs, Method
from attnscope.engine.attribution.saliency import Progress, Saliency
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.recording.sharing import eval_mode
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.model.transformer import Transformer

CONTRASTIVE_GRADIENT = "contrastive gradient × input"
CONTRASTIVE_INTEGRATED = "contrastive integrated gradients"


@dataclass(frozen=True)
class Contrast:
    """The step whose token is explained against `foil` (a token id of the target vocabulary)."""

    step: int
    foil: int

    @classmethod
    def word(cls, translator: Translator, step: int, word: str) -> Contrast:
        """The contrast with a typed word at `step`: its first target piece (the choice that step makes)."""
        codec = translator.bundle.tgt_codec
        ids = codec.encode(word.strip())
        if not ids or translator.model.config.unk_id in ids:
            raise ValueError(f"“{word.strip()}” is not in the target vocabulary: type another word or give a token id")
        return cls(step, ids[0])


@dataclass(frozen=True)
class _Step:
    """One step's inputs on the model's device: the source, the decoder inputs it reads, the token and the foil."""

    model: Transformer
    src: Tensor  # (1, S)
    tgt_in: Tensor  # (1, t + 1): <bos> y_1 .. y_t-1
    token: int
    foil: int

    def difference(self, alphas: Tensor) -> tuple[Tensor, list[Tensor]]:
        """f at each path point (A,), and the scaled embeddings (source, target) then the unscaled ones."""
        model, n = self.model, len(alphas)
        with scaled_embeddings(model, alphas.view(-1, 1, 1).to(model.generator.weight)) as seen:
            memory = model.encode(self.src.expand(n, -1))
            logits = model.decode(self.tgt_in.expand(n, -1), memory, last_only=True).logits
        log_probs = logits[:, -1].log_softmax(-1)
        return log_probs[:, self.token] - log_probs[:, self.foil], [s for _, s in seen] + [x for x, _ in seen]

    def values(self, alphas: np.ndarray) -> np.ndarray:
        """f at each path point, [A, 1]."""
        with torch.no_grad():
            f, _ = self.difference(torch.as_tensor(alphas, device=self.src.device))
        return f.double().cpu().numpy()[:, None]

    def gradients(self, alphas: np.ndarray, done: Callable[[float], None] | None = None) -> np.ndarray:
        """Gradient × input at each path point, [A, 1, S + t + 1]: one forward and one backward per chunk of points
        (each point's f depends on its own row of the batch only, so one backward of their sum gives every one)."""
        chunks, out = torch.as_tensor(alphas, device=self.src.device).split(CHUNK), []
        for c, chunk in enumerate(chunks):
            with torch.enable_grad():
                f, (src_e, tgt_e, x_src, x_tgt) = self.difference(chunk)
                g_src, g_tgt = torch.autograd.grad(f.sum(), [src_e, tgt_e])
            out.append(torch.cat([(g_src * x_src).sum(-1), (g_tgt * x_tgt).sum(-1)], -1))  # (A, S + t + 1)
            if done is not None:
                done((c + 1) / len(chunks))
        return torch.cat(out).double().cpu().numpy()[:, None]


def check(contrast: Contrast, target_ids: Sequence[int], model: Transformer) -> None:
    """One clear sentence when the contrast cannot be explained: a step out of range, the foil the token itself, a foil
    outside the vocabulary, or a first step the model forces."""
    n, vocab = len(target_ids), model.config.tgt_vocab_size
    if not 0 <= contrast.step < n:
        raise ValueError(f"step {contrast.step} is not a step of this translation: pick one from 0 to {n - 1}")
    if not 0 <= contrast.foil < vocab:
        raise ValueError(f"the foil id {contrast.foil} is outside the target vocabulary (0 to {vocab - 1}): "
                         "pick another")
    if contrast.foil == target_ids[contrast.step]:
        raise ValueError("the foil is the token the step chose: pick a rival or type another word")
    if contrast.step == 0 and model.config.forced_first is not None:
        raise ValueError("this model forces its first token, so step 0 has no rival: pick a later step")


def contrastive_saliency(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int], contrast: Contrast,
                         ig: IGSettings | None = None, progress: Progress | None = None) -> Saliency:
    """Gradient × input (`ig` None) or integrated gradients of log p(token) − log p(foil) at `contrast.step`, over the
    source tokens and the decoder inputs of that step: a Saliency of one row (score: f(x); baseline_score: f at zero
    embeddings)."""
    check(contrast, target_ids, model)
    device, t, s = model.generator.weight.device, contrast.step, len(src_ids)
    inputs = decoder_inputs(target_ids, model.config.bos_id)[: t + 1]
    step = _Step(model, torch.tensor([list(src_ids)], device=device), torch.tensor([inputs], device=device),
                 int(target_ids[t]), int(contrast.foil))
    name = CONTRASTIVE_GRADIENT if ig is None else CONTRASTIVE_INTEGRATED

    def told(done: float) -> None:
        if progress is not None:
            progress(name, done)

    with eval_mode(model):  # a shared model: under its lock, which the caller holds
        if ig is None:
            grad, ends = step.gradients(np.ones(1), told)[0], step.values(np.array([1.0, 0.0]))
            return Saliency(name, grad[:, :s], grad[:, s:], ends[0], ends[1])
        path = integrate(lambda alphas: step.gradients(alphas, told), step.values, ig)
    return Saliency(f"{name} ({path.points} path points)", path.integral[:, :s], path.integral[:, s:], path.end,
                    path.start, path.points, ig)


def translation_contrast(translator: Translator, translation: Translation, contrast: Contrast,
                         ig: IGSettings | None = None) -> Saliency:
    """Contrastive saliency of one step of a translation (teacher-forced on its own ids)."""
    with translator.inference():
        return contrastive_saliency(translator.model, translation.source_ids, translation.target_ids, contrast, ig)


def as_rows(results: Mapping[str, Saliency], source_tokens: Sequence[str], prefix_tokens: Sequence[str], token: str,
            foil: str, step: int) -> dict[str, object]:
    """The contrastive attributions of one step as plain data (the download): per method, each source token's and each
    prefix token's signed score, f(x), f(baseline), their sum, and for integrated gradients the gap and path points."""
    def one(s: Saliency) -> dict[str, object]:
        out = {"method": s.method, "source": [[t, float(v)] for t, v in zip(source_tokens, s.source[0])],
               "prefix": [[t, float(v)] for t, v in zip(prefix_tokens, s.prefix[0])], "difference": float(s.score[0]),
               "baseline_difference": float(s.baseline_score[0]), "total": float(s.total[0])}
        return out if s.settings is None else {**out, "gap": float(s.gap[0]), "path_points": s.points}
    return {"step": step, "token": token, "foil": foil, "explains": "log p(token) - log p(foil), natural log",
            "methods": {name: one(s) for name, s in results.items()}}


def _of(inputs: Inputs, ig: IGSettings | None) -> Saliency | None:
    if inputs.contrast is None:
        return None
    t = inputs.translation
    model = inputs.translator.model
    return contrastive_saliency(model, t.source_ids, t.target_ids, inputs.contrast, ig, inputs.progress)


ATTRIBUTIONS = (
    Method(CONTRASTIVE_GRADIENT, "gradient × input of log p(token) − log p(foil) at one step", exact=False,
           cost="one forward and one backward pass", order=6, explains=CONTRAST,
           explanation="**Contrastive gradient × input** (Yin & Neubig, \"Interpreting Language Models with "
                       "Contrastive Explanations\", EMNLP 2022). The gradient of the difference between the chosen "
                       "token's and a foil's log-probability at one step, times each input embedding: which inputs "
                       "made the model prefer its token to the foil (positive) or pulled towards the foil (negative).",
           compute=lambda inputs: _of(inputs, None), source_map=lambda s, _layer: np.abs(s.source)),
    Method(CONTRASTIVE_INTEGRATED, "integrated gradients of log p(token) − log p(foil) at one step: adds up to the "
                                   "difference's change from zero embeddings", exact=False,
           cost="one forward and one backward pass per path point (8 to 1,024, adaptive)", order=7, explains=CONTRAST,
           explanation="**Contrastive integrated gradients.** The same difference, its gradients averaged along "
                       "the path from zero embeddings to the real ones, so the attributions add up to how much the "
                       "difference changes along that path (refined until they do, within the tolerance you set).",
           compute=lambda inputs: None if inputs.ig is None else _of(inputs, inputs.ig),
           source_map=lambda s, _layer: np.abs(s.source)),
)
