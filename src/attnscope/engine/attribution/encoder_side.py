"""The encoder's share of gradient × input at each path point of integrated gradients (engine/attribution/saliency.py).

The batched backward of each generated token stops at the encoder's output (its memory); this carries the gradient on
the memory on to the source tokens' scores, sum_d x_jd ∂f_t/∂x_jd. Forward mode runs the encoder once per path point
along each source token's scale (S tangents) and joins the two by the chain rule; backward mode keeps the encoder's
graph and backpropagates each generated token's gradient through it (T seeds). Whichever carries fewer is taken.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnscope.engine.attribution.batched import batched_grad
from attnscope.model.hooks import EMBED
from attnscope.model.transformer import EncoderOutput, Transformer

SOURCE_ROWS = 16384  # encoder rows the forward-mode pass carries (source tokens × path points × source length)


def forward_mode(s: int, t: int) -> bool:
    """Whether the source side of a source of `s` tokens and `t` generated tokens goes by forward mode."""
    return s <= t


def path_chunk(s: int, forward: bool, chunk: int, source_rows: int = SOURCE_ROWS) -> int:
    """Path points one pass takes for a source of `s` tokens: `chunk`, fewer in forward mode where its s tangents
    of s rows at each path point would outgrow `source_rows` (one at least)."""
    return max(1, min(chunk, source_rows // (s * s))) if forward else chunk


@dataclass(frozen=True)
class EncoderSide:
    """The encoder's output at each path point and how a gradient on it reaches the source tokens' scores."""

    encoded: EncoderOutput  # memory (A, S, D), without a graph
    along: Tensor | None  # forward mode: (S, A, S, D) sum_d x_jd ∂memory/∂x_jd for each source token j
    graph: tuple[Tensor, Tensor, Tensor] | None  # backward mode: memory with its graph, scaled and unscaled embeddings

    def scores(self, g_memory: Tensor) -> Tensor:
        """(K, A, S) gradient × input of the source tokens from K gradients on the memory (K, A, S, D)."""
        if self.along is not None:
            return torch.einsum("kasd,jasd->kaj", g_memory, self.along)  # the chain rule through the encoder
        memory, scaled, x = self.graph
        with torch.enable_grad():
            (g,) = batched_grad(memory, [scaled], g_memory)
        return (g * x).sum(-1)


def encoder_side(model: Transformer, src: Tensor, alphas: Tensor, forward: bool) -> EncoderSide:
    """The encoder's side of the path points `alphas` for the source ids `src` (1, S), by forward mode or not."""
    n, s, seen = len(alphas), src.shape[1], []  # backward mode: x, its scaled leaf; then the mask
    src = src.expand(n, -1)

    def encode(swap: Callable[[Tensor], Tensor]) -> Tensor:  # the memory, each source embedding swapped by `swap`
        with ExitStack() as listening:
            model.encoder.hooks.listen(listening, EMBED, swap)
            encoded = model.encode(src)
        seen.append(encoded.mask)  # from the ids alone: the same in every tangent
        return encoded.memory

    if not forward:
        def scaled(out: Tensor) -> Tensor:
            x = out.detach()
            seen.extend([x, (x * alphas.view(-1, 1, 1).to(x)).requires_grad_(True)])
            return seen[-1]

        with torch.enable_grad(), sdpa_kernel(SDPBackend.MATH):  # attention as products: their backward batches
            memory = encode(scaled)
        x, leaf, mask = seen
        return EncoderSide(EncoderOutput(memory.detach(), mask), None, (memory, leaf, x))
    scales = alphas.view(-1, 1).to(model.generator.weight).repeat(1, s)  # forward mode takes no expanded views
    along = torch.eye(s, dtype=scales.dtype, device=scales.device)[:, None].repeat(1, n, 1)  # token j: e_j

    def memory_at(scale: Tensor) -> Tensor:  # (A, S) -> (A, S, D)
        return encode(lambda out: out.detach() * scale.unsqueeze(-1))

    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):  # the fused kernel has no forward mode; this is its softmax
        memory, d_memory = torch.func.vmap(lambda t: torch.func.jvp(memory_at, (scales,), (t,)), out_dims=(None, 0))(along)
    return EncoderSide(EncoderOutput(memory, seen[-1]), d_memory, None)
