"""The sidebar's selection (attention kind, layer, head) and the decoding step: the one place that fits them to a
model or a record (the kinds and their labels re-exported for the pages)."""
from __future__ import annotations

from attnscope.model.config import ModelConfig
from attnscope.records.attention import KIND_LABELS, KINDS, AttentionRecord, Kind
from attnscope.ui import state
from attnscope.ui.state import ViewState

__all__ = ["KIND_LABELS", "KINDS", "fit_layer", "fit_step", "fit_to_model", "head", "layer", "n_layers"]


def fit_layer(view: ViewState, n_layers: int) -> int:
    """The selected layer, clamped to a model with `n_layers` layers (a smaller model may be active)."""
    return max(0, min(view.layer, n_layers - 1))


def layer(view: ViewState, record: AttentionRecord, of_kind: Kind) -> int:
    """The selected layer as it exists for one kind of attention in `record`."""
    return fit_layer(view, record.n_layers(of_kind))


def head(view: ViewState, n_heads: int | None = None) -> int | None:
    """The selected head, or None for the mean of heads (also when a record or model of `n_heads` lacks it)."""
    return view.head if view.head is not None and (n_heads is None or view.head < n_heads) else None


def fit_step(view: ViewState, n_steps: int) -> int:
    """The selected decoding step, clamped to a translation of `n_steps` steps."""
    return min(max(view.step, 0), n_steps - 1)


def n_layers(config: ModelConfig, kind: Kind) -> int:
    """How many layers a model has for one kind of attention (the encoder's, or the decoder's for both others)."""
    return config.n_encoder_layers if kind == "encoder" else config.n_decoder_layers


def fit_to_model(view: ViewState, config: ModelConfig) -> None:
    """Store the selection fitted to the active model, before the selectors that show it are drawn."""
    state.set_layer(fit_layer(view, n_layers(config, view.kind)))
    state.set_head(head(view, config.n_heads))
