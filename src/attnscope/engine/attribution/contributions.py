"""Token-to-token contributions of an encoder-decoder, per layer and composed over layers (rollout):
the common shape of ALTI+ (engine/attribution/alti.py) and value zeroing (engine/attribution/value_zeroing.py).

Each encoder layer mixes source positions ([S, S]); each decoder layer mixes, for generated
token t, the source tokens (through cross-attention) and the decoder's own positions
<bos> y1 .. (through masked self-attention and the residual stream) ([T, S + T]). Rollout
multiplies the layers out: a decoder position carries what earlier layers mixed into it, a
source position what the encoder mixed into it, so with rows summing to one each generated
token's shares over the source tokens plus the target prefix sum to one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from attnscope.engine.recording.trace import EVERYTHING, Layer, Trace


@dataclass(frozen=True)
class Contributions:
    """Context mixing of one sentence pair by one method; every row sums to one."""

    method: str  # "ALTI+" or "value zeroing"
    encoder_layers: np.ndarray  # [L, S, S] per encoder layer
    decoder_layers: np.ndarray  # [L, T, S + T] per decoder layer: source columns, then decoder-input columns
    encoder_rollout: np.ndarray  # [S, S] encoder output over source tokens
    decoder_rollout: np.ndarray  # [T, S + T] whole model: generated token t over source and prefix

    @property
    def n_source(self) -> int:
        return self.encoder_rollout.shape[0]

    @property
    def source(self) -> np.ndarray:
        """[T, S] share of each source token in each generated token."""
        return self.decoder_rollout[:, : self.n_source]

    @property
    def prefix(self) -> np.ndarray:
        """[T, T] share of each decoder input (<bos> y1 ..) in each generated token (zero after t)."""
        return self.decoder_rollout[:, self.n_source:]

    @property
    def source_share(self) -> np.ndarray:
        """[T] how much each generated token relied on the source (the rest is the prefix)."""
        return self.source.sum(-1)


def rolled_out(method: str, encoder_layers: Sequence[np.ndarray], decoder_layers: Sequence[np.ndarray]) -> Contributions:
    """Compose per-layer mixing matrices (encoder [S, S], decoder [T, S + T]) over the whole model."""
    s, t = encoder_layers[0].shape[0], decoder_layers[0].shape[0]
    memory = np.eye(s)
    for mixing in encoder_layers:
        memory = mixing @ memory  # encoder output over source tokens
    memory_rows = np.hstack([memory, np.zeros((s, t))])  # source positions as rows over [source | prefix]
    rolled = np.hstack([np.zeros((t, s)), np.eye(t)])  # decoder input t is token t of the prefix
    for mixing in decoder_layers:
        rolled = mixing[:, s:] @ rolled + mixing[:, :s] @ memory_rows
    return Contributions(method, np.stack(encoder_layers), np.stack(decoder_layers), memory, rolled)


@dataclass(frozen=True)
class Mixing:
    """How one method reads one traced layer (traced with everything kept, its modules at hand, in float64): the
    layer's [S, S] mixing for an encoder layer, [T, S + T] for a decoder layer (source columns, then the prefix)."""

    method: str
    encoder: Callable[[Layer], np.ndarray]
    decoder: Callable[[Layer], np.ndarray]

    def from_trace(self, tr: Trace) -> Contributions:
        """Per layer and rolled out, from a traced pass of a whole float64 model (exact_pass.contributions runs one
        layer at a time instead)."""
        tr.require(EVERYTHING)
        with torch.no_grad():
            return rolled_out(self.method, [self.encoder(lt) for lt in tr.encoder],
                              [self.decoder(lt) for lt in tr.decoder])
