"""Every attribution of one translation in one place: raw cross-attention, norm-based attention,
ALTI+, value zeroing and gradient saliency, each as a [generated token, source token] map, and the
source/prefix split of every generated token (ALTI+, the one that accounts for the residual path)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnscope.engine.attribution import alti, value_zeroing
from attnscope.engine.attribution.contributions import Contributions, float64_model
from attnscope.engine.attribution.norms import layer_norms, norm_record
from attnscope.engine.attribution.quadrature import IGSettings
from attnscope.engine.attribution.saliency import Progress, Saliency, saliency
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.engine.recording.tracer import trace
from attnscope.records.attention import AttentionRecord

ATTENTION, NORM, ALTI, VALUE_ZEROING, GRAD_X_INPUT, INTEGRATED = (
    "attention", "norm-based", alti.METHOD, value_zeroing.METHOD, "gradient × input", "integrated gradients")
METHODS = (ATTENTION, NORM, ALTI, VALUE_ZEROING, GRAD_X_INPUT, INTEGRATED)
REFERENCES = (ALTI, VALUE_ZEROING, GRAD_X_INPUT, INTEGRATED)  # what attention is compared against


@dataclass(frozen=True)
class SentenceAttribution:
    """The attributions of one translation's output tokens (rows) over its source tokens (columns)."""

    source_tokens: tuple[str, ...]
    output_tokens: tuple[str, ...]  # what each step produced
    weights: AttentionRecord  # raw attention, [L, H, Q, K] per kind
    norms: AttentionRecord  # norm-based attention, same shapes
    cross_layer_norms: np.ndarray  # [L, T, S] ||sum_h a^h f_h(x_j)|| per decoder layer
    alti_plus: Contributions  # ALTI+: the source/prefix split
    value_zeroing: Contributions
    gradient_x_input: Saliency
    integrated_gradients: Saliency | None

    @property
    def split(self) -> Contributions:
        """The contributions behind the source/prefix split: ALTI+ (value zeroing's rollout leaves the
        residual path out and puts nearly everything on the source; see docs/attribution.md)."""
        return self.alti_plus

    def source_maps(self, layer: int) -> dict[str, np.ndarray]:
        """Nonnegative [T, S] scores per method; attention and norms from decoder layer `layer`
        (mean of heads; the layer-level norm of the summed heads), saliency as magnitudes."""
        maps = {ATTENTION: self.weights.mean_over_heads("cross", layer).astype(np.float64),
                NORM: self.cross_layer_norms[layer].astype(np.float64),
                ALTI: self.alti_plus.source,
                VALUE_ZEROING: self.value_zeroing.source,
                GRAD_X_INPUT: np.abs(self.gradient_x_input.source)}
        if self.integrated_gradients is not None:
            maps[INTEGRATED] = np.abs(self.integrated_gradients.source)
        return maps


def exact_contributions(translator: Translator, translation: Translation) -> tuple[Contributions, Contributions]:
    """ALTI+ and value zeroing of a translation (teacher-forced on its own ids), from one traced pass of a
    float64 copy: the split and the value-zeroing reference, without gradients."""
    with float64_model(translator.model) as exact_model:
        exact = trace(exact_model, translation.source_ids, decoder_inputs(translation.target_ids, exact_model.config.bos_id))
        return alti.from_trace(exact), value_zeroing.from_trace(exact)


def attribute(translator: Translator, translation: Translation, ig: IGSettings | None = None,
              progress: Progress | None = None, exact: tuple[Contributions, Contributions] | None = None
              ) -> SentenceAttribution:
    """All attributions of a translation, teacher-forced on its own output ids: one traced pass for the
    norms, one on a float64 copy for ALTI+ and value zeroing (unless `exact` holds them, from
    exact_contributions), gradients for saliency; `ig` None skips integrated gradients. `progress` hears what
    runs and how far it got (gradients: by target token)."""
    if translation.attention is None or not translation.steps:
        raise ValueError("the translation carries no attention; translate with capture=True")
    model, src, tgt = translator.model, translation.source_ids, translation.target_ids
    tell = progress or (lambda _what, _done: None)
    if exact is None:
        tell(f"{ALTI} and {VALUE_ZEROING}", 0.0)
        exact = exact_contributions(translator, translation)
    split, vz = exact
    with translator.inference():
        tell(f"{NORM} attention", 0.0)
        traced = trace(model, src, decoder_inputs(tgt, model.config.bos_id))
        gxi = saliency(model, src, tgt, progress=progress)
        integrated = saliency(model, src, tgt, ig, progress) if ig is not None else None
    return SentenceAttribution(translation.source_tokens, translation.output_tokens, translation.attention,
                               norm_record(traced, translation.attention), layer_norms(traced, "cross"),
                               split, vz, gxi, integrated)
