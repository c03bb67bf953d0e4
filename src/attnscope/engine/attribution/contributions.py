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

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from attnscope.engine.recording.sharing import model_lock
from attnscope.model.budget import model_refusal
from attnscope.model.transformer import Transformer


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


def float64_refusal(model: Transformer) -> str | None:
    """One sentence when the float64 copy of `model` (float64_model) would not fit in the memory available now."""
    return model_refusal(model.config.element_count(), "the float64 copy that value zeroing and ALTI+ need", 8)


def _float64_copy(model: Transformer) -> Transformer:
    """The same network in float64 on the CPU, built from the config and given the state dict's tensors (so no
    listener on the shared model's hook points, such as a head gate, comes along). The model's own initialisation
    is skipped and
    each tensor is converted once, straight into place (a tied one once for all its names): initialising,
    copying and then converting took ~0.5 s more for opus-mt's shape; it is built on the meta device, so a big
    model is never initialised only to be overwritten. A copy the available memory cannot hold is refused first
    (MemoryError with a sentence)."""
    refused = float64_refusal(model)
    if refused:
        raise MemoryError(refused)
    with torch.random.fork_rng(devices=[]), torch.device("meta"):  # nothing allocated until each tensor is assigned
        exact = Transformer(model.config, initialise=False)
    converted: dict[int, torch.Tensor] = {}
    for t in model.state_dict(keep_vars=True).values():  # keep_vars: a tied parameter is one object under its names
        if id(t) not in converted:
            converted[id(t)] = t.detach().to("cpu", torch.float64 if t.is_floating_point() else t.dtype)
    exact.load_state_dict({name: converted[id(t)] for name, t in model.state_dict(keep_vars=True).items()}, assign=True)
    if model.config.tie_embeddings:  # assign gave the output layer its own Parameter around the same tensor
        exact.generator.weight = exact.tgt_embed.weight
    return exact.to(dtype=torch.float64).eval()  # the buffers the state dict leaves out (position tables)


@contextmanager
def float64_model(model: Transformer) -> Iterator[Transformer]:
    """A float64 copy of `model` on the CPU in eval mode, private to the block and dropped after it.

    Value zeroing compares outputs that differ by ~1e-5 of their size, which float32 cannot resolve
    (shares off by up to 1e-2, some negative); the copy computes the same function of the same
    weights (every float32 is exactly a float64) without that rounding. It is made for each use (~40 ms
    for the shipped model), not kept: a kept copy held twice the model's float32 size for the server's
    lifetime (18 MB for the shipped model, 600 MB for a 74M-parameter import), and a private one needs
    no lock while it runs. The model's lock is held while its weights are read.
    """
    with model_lock(model):
        exact = _float64_copy(model)
    yield exact
