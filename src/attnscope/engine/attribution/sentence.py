"""Every attribution of one translation in one place: each registered method's result (engine/attribution/registry.py:
raw cross-attention, norm-based attention, ALTI+, value zeroing, gradient saliency, and the contrastive methods when a
foil is given), their [generated token, source token] maps, and the source/prefix split of every generated token
(ALTI+, the one that accounts for the residual path)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from attnscope.engine.attribution import alti, exact_pass, norms, saliency, value_zeroing
from attnscope.engine.attribution.contrastive import Contrast
from attnscope.engine.attribution.contributions import Contributions
from attnscope.engine.attribution.norms import norm_record
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.registry import CONTRAST, TOKEN, Inputs, methods
from attnscope.engine.attribution.saliency import Progress, Saliency
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.engine.recording.tracer import trace
from attnscope.records.attention import AttentionRecord

ATTENTION = norms.ATTENTION
NORM = norms.NORM
ALTI = alti.METHOD
VALUE_ZEROING = value_zeroing.METHOD
GRAD_X_INPUT = saliency.GRADIENT_X_INPUT
INTEGRATED = saliency.INTEGRATED


@dataclass(frozen=True)
class SentenceAttribution:
    """The attributions of one translation's output tokens (rows) over its source tokens (columns)."""

    source_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]  # what each step produced
    weights: AttentionRecord  # raw attention, [L, H, Q, K] per kind
    norms: AttentionRecord  # norm-based attention, same shapes
    results: Mapping[str, Any]  # each registered method's result by name; None where it did not run
    contrast: Contrast | None = None  # the step and foil of the contrastive methods' results

    @property
    def cross_layer_norms(self) -> np.ndarray:
        """[L, T, S] ||sum_h a^h f_h(x_j)|| per decoder layer."""
        return self.results[NORM]

    @property
    def alti_plus(self) -> Contributions:
        return self.results[ALTI]

    @property
    def value_zeroing(self) -> Contributions:
        return self.results[VALUE_ZEROING]

    @property
    def gradient_x_input(self) -> Saliency:
        return self.results[GRAD_X_INPUT]

    @property
    def integrated_gradients(self) -> Saliency | None:
        return self.results.get(INTEGRATED)

    @property
    def split(self) -> Contributions:
        """The contributions behind the source/prefix split: ALTI+ (value zeroing's rollout leaves the
        residual path out and puts nearly everything on the source; see docs/attribution.md)."""
        return self.alti_plus

    def contrastive(self) -> dict[str, Saliency]:
        """The contrastive methods' results (one row: the contrast's step), by method; empty without a contrast."""
        return {m.name: self.results[m.name] for m in methods(CONTRAST) if self.results.get(m.name) is not None}

    def source_maps(self, layer: int) -> dict[str, np.ndarray]:
        """Nonnegative [T, S] scores of every method that ran; attention and norms from decoder layer `layer`
        (mean of heads; the layer-level norm of the summed heads), saliency as magnitudes."""
        return {m.name: m.source_map(self.results[m.name], layer) for m in methods(TOKEN)
                if self.results.get(m.name) is not None}


def exact_contributions(translator: Translator, translation: Translation) -> tuple[Contributions, Contributions]:
    """ALTI+ and value zeroing of a translation (teacher-forced on its own ids), from one traced pass in float64, one
    layer at a time (exact_pass.py): the split and the value-zeroing reference, without gradients."""
    model = translator.model
    prefix = decoder_inputs(translation.target_ids, model.config.bos_id)
    return exact_pass.contributions(model, translation.source_ids, prefix, (alti.MIXING, value_zeroing.MIXING))


def attribute(translator: Translator, translation: Translation, ig: IGSettings | None = None,
              progress: Progress | None = None, exact: tuple[Contributions, Contributions] | None = None,
              contrast: Contrast | None = None) -> SentenceAttribution:
    """All attributions of a translation, teacher-forced on its own output ids: one traced pass for the
    norms, one in float64 for ALTI+ and value zeroing (unless `exact` holds them, from
    exact_contributions), gradients for saliency; `ig` None skips integrated gradients; `contrast` (a step and a
    foil) adds the contrastive methods. `progress` hears what runs and how far it got (gradients: by target token)."""
    if translation.attention is None or not translation.steps:
        raise ValueError("the translation carries no attention; translate with capture=True")
    model, src, tgt = translator.model, translation.source_ids, translation.target_ids
    tell = progress or (lambda _what, _done: None)
    if exact is None:
        tell(f"{ALTI} and {VALUE_ZEROING}", 0.0)
        exact = exact_contributions(translator, translation)
    with translator.inference():
        tell(f"{NORM} attention", 0.0)
        traced = trace(model, src, decoder_inputs(tgt, model.config.bos_id))
        inputs = Inputs(translator, translation, ig, progress, exact, traced, contrast)
        results = {m.name: m.compute(inputs) for m in methods(None)}
    return SentenceAttribution(translation.source_tokens, translation.output_tokens, translation.attention,
                               norm_record(traced, translation.attention), results, contrast)


def contrast_attribute(translator: Translator, translation: Translation, contrast: Contrast,
                       ig: IGSettings | None = None, progress: Progress | None = None) -> dict[str, Saliency]:
    """The contrastive methods alone (what the Step page shows for a forced rival): each one's one-row Saliency at
    `contrast.step`; `ig` None skips contrastive integrated gradients."""
    with translator.inference():
        inputs = Inputs(translator, translation, ig, progress, None, None, contrast)
        results = {m.name: m.compute(inputs) for m in methods(CONTRAST)}
    return {name: r for name, r in results.items() if r is not None}
