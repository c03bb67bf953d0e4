"""Attribution: how much each input token shaped each prediction (norms, ALTI+, value zeroing, gradients)."""
from attnscope.engine.lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "sentence": ["attribute", "contrast_attribute", "SentenceAttribution"],
    "contrastive": ["Contrast", "contrastive_saliency"],
    "registry": ["methods", "method"],
    "alti": ["alti_plus"],
    "value_zeroing": ["value_zeroing"],
    "norms": ["weighted_value_norms"],
    "saliency": ["saliency", "translation_saliency", "Saliency"],
    "quadrature": ["IGSettings"],
    "agreement": ["layer_agreement", "token_agreement", "agreement_matrix", "best_layer"],
    "step_attribution": ["step_attributions", "StepAttributions"],
})
