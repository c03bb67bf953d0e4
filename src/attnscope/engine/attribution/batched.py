"""One backward batched over many seeds: each generated token's gradient at once (engine/attribution/path_gradients.py),
or each token's gradient on the encoder's output carried on to the source tokens (encoder_side.py)."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor


def batched_grad(output: Tensor, inputs: Sequence[Tensor], seeds: Tensor) -> tuple[Tensor, ...]:
    """The gradients of `output` with respect to `inputs` for each seed of `seeds` (K, *output.shape), each
    (K, *input.shape), keeping the graph for later calls. torch.func.vmap batches the backward by its batching
    rules, which cover LayerNorm's and the activations' backward, and attention's where the forward ran it as
    explicit products (SDPBackend.MATH); autograd's own `is_grads_batched` loops over the seeds for those."""
    return torch.func.vmap(lambda seed: torch.autograd.grad(output, inputs, seed, retain_graph=True))(seeds)
