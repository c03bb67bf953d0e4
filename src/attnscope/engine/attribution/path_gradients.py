"""Gradient × input of every generated token at many path points at once (what engine/attribution/saliency.py
integrates): sum_d x_jd ∂f_t/∂x_jd at α x, f_t the log-probability of the token generated at step t.

Path points ride on the batch dimension. Each generated token needs a backward of its own (f_t's gradient), batched
over a group of tokens (batched.py), each token seeded at its own row with its output layer's gradient.
One forward serves every group: the decoder runs the groups one after another through the model's own incremental
decoding (its cache of keys and values), so a group's backward reaches only the rows up to its own (a causal
decoder's rows do not depend on later ones), and its last layer only at its own rows (the prefix is read as
decoding read it, a <pad> inside it included). The backward stops at the encoder's output, which runs once per path
point; engine/attribution/encoder_side.py carries it on to the source tokens (forward mode along each source token
when there are fewer of them).
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnscope.engine.attribution.batched import batched_grad
from attnscope.engine.attribution.encoder_side import SOURCE_ROWS, EncoderSide, encoder_side, forward_mode, path_chunk
from attnscope.engine.recording.trace import decoder_inputs
from attnscope.model.hooks import EMBED, FINAL
from attnscope.model.transformer import DecoderCache, EncoderOutput, Transformer

CHUNK = 16  # path points per forward pass: bounds memory, keeps matmuls wide
ROWS = 2048  # decoder rows one batched backward carries (tokens × path points × prefix length): bounds its memory
GROUP_ROWS = 256  # decoder rows (× path points) one more group costs as much as: its own kernels and calls


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
    a group's backward reads (hi - lo) × hi rows at each path point (causal: its last token's prefix; the forward is
    shared), and the group itself `group_rows`."""
    cost, start = [0] + [0] * t_max, [0] * (t_max + 1)  # the least cost of tokens 0..hi-1, and its last group's lo
    for hi in range(1, t_max + 1):
        widest = max(1, rows // (n_alphas * hi))  # tokens a group ending at hi may hold
        cost[hi], start[hi] = min((cost[lo] + n_alphas * (hi - lo) * hi + group_rows, lo)
                                  for lo in range(max(0, hi - widest), hi))
    groups, hi = [], t_max
    while hi:
        groups.append((start[hi], hi))
        hi = start[hi]
    return groups[::-1]


@dataclass(frozen=True)
class PathPair:
    """One source and its teacher-forced target on the model's device, with the tokens f_t explains."""

    model: Transformer
    src: Tensor  # (1, S)
    tgt_in: Tensor  # (1, T)
    tokens: list[int]

    def log_probs(self, hidden: Tensor) -> Tensor:
        """f_t at each path point (A, T) from the last decoder layer's output over every row (A, T, D): the model's
        final norm and output layer, then the log-probability of each row's token."""
        logits = self.model.generator(self.model.decoder_norm(hidden)).log_softmax(-1)  # (A, T, V)
        tokens = torch.tensor(self.tokens, device=hidden.device)
        return logits.gather(-1, tokens.expand(len(hidden), -1).unsqueeze(-1)).squeeze(-1)

    def values(self, alphas: np.ndarray) -> np.ndarray:
        """f at each path point, [A, T]: one full pass."""
        kept: list[Tensor] = []
        model, n = self.model, len(alphas)
        scale = torch.as_tensor(alphas, device=self.src.device).view(-1, 1, 1).to(model.generator.weight)
        with torch.no_grad(), ExitStack() as listening, scaled_embeddings(model, scale):
            model.decoder.hooks.listen(listening, FINAL, kept.append)
            model.decode(self.tgt_in.expand(n, -1), model.encode(self.src.expand(n, -1)), last_only=True)
            return self.log_probs(kept[0]).double().cpu().numpy()

    def head_gradients(self, hidden: Tensor, first: int) -> Tensor:
        """∂f_t/∂h_t (A, R, D) for the R rows of the last decoder layer's output `hidden` (A, R, D), the first being
        target position `first`: the derivative of log-softmax at the row's token, e_y − softmax(z), taken back
        through the output layer and the final norm (the same as log-softmax's backward, in fewer passes over the
        vocabulary)."""
        with torch.enable_grad():
            rows = hidden.detach().requires_grad_(True)
            logits = self.model.generator(self.model.decoder_norm(rows))  # (A, R, V)
        seed = logits.detach().softmax(-1).neg_()
        tokens = torch.tensor(self.tokens[first: first + hidden.shape[1]], device=hidden.device)
        index = tokens.expand(len(hidden), -1).unsqueeze(-1)
        seed.scatter_add_(-1, index, torch.ones(index.shape, dtype=seed.dtype, device=seed.device))
        (head,) = torch.autograd.grad(logits, rows, seed)
        return head

    def gradients(self, alphas: np.ndarray, rows: int = ROWS, done: Callable[[float], None] | None = None,
                  source_rows: int = SOURCE_ROWS, forward: bool | None = None, chunk: int = CHUNK) -> np.ndarray:
        """Gradient × input at each path point, [A, T, S + T]: at most `chunk` path points a pass, the target
        tokens in groups of at most `rows` decoder rows per batched backward, `done` told the fraction finished after
        each; the source side by forward mode or not (`forward`; None: whichever carries fewer, encoder_side.py)."""
        t_max, s, out = len(self.tokens), self.src.shape[1], []
        forward = forward_mode(s, t_max) if forward is None else forward
        chunks = torch.as_tensor(alphas, device=self.src.device).split(path_chunk(s, forward, chunk, source_rows))
        if done is not None:
            done(0.0)
        for c, alphas_c in enumerate(chunks):
            def told(hi: int, c: int = c) -> None:
                if done is not None:
                    done((c * t_max + hi) / (len(chunks) * t_max))

            side = encoder_side(self.model, self.src, alphas_c, forward)
            out.append(self._chunk(alphas_c, side, token_groups(t_max, len(alphas_c), rows), told))
        return torch.cat(out).double().cpu().numpy()

    def _chunk(self, alphas: Tensor, side: EncoderSide, groups: list[tuple[int, int]],
               told: Callable[[int], None]) -> Tensor:
        """Gradient × input at the path points `alphas`, (A, T, S + T): one forward of the decoder, group after
        group, to the last layer's output at each group's rows; then per group one backward, batched over its tokens,
        to the target embeddings it read and the encoder's output, which `side` carries on to the source tokens."""
        model, n, t_max = self.model, len(alphas), len(self.tokens)
        scale = alphas.view(-1, 1, 1).to(model.generator.weight)
        kept: list[Tensor] = []  # the last layer's output at each group's rows, (A, hi - lo, D)
        out = []
        with torch.enable_grad():
            memory = side.encoded.memory.detach().requires_grad_(True)
            source, cache = EncoderOutput(memory, side.encoded.mask), DecoderCache.empty(len(model.decoder))
            with ExitStack() as listening, scaled_embeddings(model, scale) as seen, sdpa_kernel(SDPBackend.MATH):
                model.decoder.hooks.listen(listening, FINAL, kept.append)
                for lo, hi in groups:
                    model.decode(self.tgt_in[:, lo:hi].expand(n, -1), source, cache, last_only=True)
            for g, ((lo, hi), hidden) in enumerate(zip(groups, kept)):
                k = torch.arange(hi - lo, device=hidden.device)
                seeds = hidden.new_zeros(hi - lo, *hidden.shape)  # (hi - lo, A, hi - lo, D): token lo+k's on its row
                seeds[k, :, k] = self.head_gradients(hidden, lo).transpose(0, 1)
                g_memory, *g_tgt = batched_grad(hidden, [memory, *(e for _x, e in seen[: g + 1])], seeds)
                prefix = [(grad * x).sum(-1) for grad, (x, _e) in zip(g_tgt, seen)]  # each (hi - lo, A, its rows)
                scores = torch.cat([side.scores(g_memory), *prefix], -1)  # (hi - lo, A, S + hi)
                out.append(torch.nn.functional.pad(scores, (0, t_max - hi)).transpose(0, 1))  # causal: zero after hi
                told(hi)
        return torch.cat(out, 1)


def path_pair(model: Transformer, src_ids: Sequence[int], target_ids: Sequence[int]) -> PathPair:
    device = model.generator.weight.device
    return PathPair(model, torch.tensor([list(src_ids)], device=device),
                    torch.tensor([decoder_inputs(target_ids, model.config.bos_id)], device=device),
                    [int(i) for i in target_ids])
