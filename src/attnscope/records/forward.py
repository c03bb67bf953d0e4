"""Plain data of the inside view (numpy only, no torch): one traced forward pass and the logit lens.

`engine/inside/traced.py` makes a ForwardTrace of the tracer's Trace (engine/recording/trace.py);
`engine/inside/lens.py` makes a LogitLens; figure builders draw them. Arrays are float32 of batch item 0.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from attnscope.model.kinds import Kind


@dataclass(frozen=True)
class StreamInputs:
    """What a stack's first layer reads (sections 3.4, 3.5): token embedding × √d_model + positional encoding."""

    token_embedding: np.ndarray  # (N, D) rows of the embedding table, before scaling
    scale: float  # √d_model, or 1 for a model that does not scale its embeddings (config.embed_scale)
    position: np.ndarray  # (N, D) positional encodings of positions 0..N-1
    total: np.ndarray  # (N, D) the sum the first layer reads (embedding dropout is off in eval)


@dataclass(frozen=True)
class SublayerTrace:
    """One attention sublayer and its residual block, as the model ran them (H heads, Q queries, K keys)."""

    q: np.ndarray  # (H, Q, dh) projected queries
    k: np.ndarray  # (H, K, dh) projected keys
    v: np.ndarray  # (H, K, dh) projected values
    scores: np.ndarray  # (H, Q, K) q·k × scale + bias, -inf where masked: what the softmax read
    scale: float  # what q·k was multiplied by: 1/√dh, or 1 where the model leaves it out (T5, config.scale_scores)
    bias: np.ndarray | None  # (H, Q, K) the relative position bias added to q·k × scale (T5's self-attention); None: none
    weights: np.ndarray  # (H, Q, K) softmax of the scores
    concat: np.ndarray  # (Q, H·dh) heads' outputs side by side: the input of W_O
    output: np.ndarray  # (Q, D) concat · W_O^T (+ b_O): the attention module's output
    w_o: np.ndarray  # (D, H·dh) W_O as nn.Linear stores it (out, in)
    b_o: np.ndarray | None  # (D,); None where the output projection has no bias (T5, config.out_bias)
    residual: np.ndarray  # (Q, D) the block's input x (the residual stream)
    norm_input: np.ndarray  # (Q, D) what the block's LayerNorm read
    norm_output: np.ndarray  # (Q, D) what it returned
    block_output: np.ndarray  # (Q, D) the block's output (post-LN: LN(x + attn); pre-LN: x + attn(LN(x)))


@dataclass(frozen=True)
class ForwardTrace:
    """One source and one target prefix through the whole model, with every attention sublayer."""

    source_ids: tuple[int, ...]
    target_ids: tuple[int, ...]  # decoder inputs <bos> y1 .. y_t
    norm: str  # "post" or "pre"
    norm_kind: str  # the norm's name as the views say it: "LayerNorm" or "RMSNorm" (T5's: no mean, no bias)
    relative: bool  # positions are T5's bias on the self-attention scores (SublayerTrace.bias), nothing is added
    use_cache: bool
    source: StreamInputs
    target: StreamInputs
    memory: np.ndarray  # (S, D) encoder output (after the final norm, if any): cross-attention's keys/values read it
    sublayers: dict[tuple[Kind, int], SublayerTrace]  # by (kind, layer)
    decoder_layers: np.ndarray  # (L, T, D) output of each decoder layer
    logits: np.ndarray  # (T, V) the model's next-token logits at every target position

    def until(self, step: int) -> "ForwardTrace":
        """The trace of decoding step `step` alone: target positions 0..step. The decoder is causal, so these
        rows are exactly what the model computed at that step (with the cache, literally the same calls)."""
        n = step + 1
        if not 1 <= n <= len(self.target_ids):
            raise ValueError(f"the target prefix has steps 0..{len(self.target_ids) - 1}; asked for step {step}")
        target = StreamInputs(self.target.token_embedding[:n], self.target.scale, self.target.position[:n], self.target.total[:n])
        sublayers = {key: s if key[0] == "encoder" else _first_queries(s, n, key[0] == "decoder")
                     for key, s in self.sublayers.items()}
        return dataclasses.replace(self, target_ids=self.target_ids[:n], target=target, sublayers=sublayers,
                                   decoder_layers=self.decoder_layers[:, :n], logits=self.logits[:n])

    def sublayer(self, kind: Kind, layer: int) -> SublayerTrace:
        if (kind, layer) not in self.sublayers:
            n = sum(1 for k, _ in self.sublayers if k == kind)
            raise ValueError(f"{kind} attention has layers 0..{n - 1}; asked for layer {layer}")
        return self.sublayers[(kind, layer)]


def _first_queries(s: SublayerTrace, n: int, self_attention: bool) -> SublayerTrace:
    """The first n queries of a decoder sublayer; for self-attention also only the first n keys."""
    keys = slice(0, n) if self_attention else slice(None)
    rows = {name: getattr(s, name)[:n] for name in ("concat", "output", "residual", "norm_input", "norm_output", "block_output")}
    return dataclasses.replace(s, q=s.q[:, :n], k=s.k[:, keys], v=s.v[:, keys], scores=s.scores[:, :n, keys],
                               bias=None if s.bias is None else s.bias[:, :n, keys], weights=s.weights[:, :n, keys], **rows)


@dataclass(frozen=True)
class LogitLens:
    """Per decoder layer, the top-k next tokens at one position and the rank of the token finally chosen."""

    position: int  # decoder input position (decoding step)
    chosen_id: int
    top_ids: np.ndarray  # (L, k)
    top_probs: np.ndarray  # (L, k)
    chosen_rank: np.ndarray  # (L,) 1 = the layer's favourite
    chosen_prob: np.ndarray  # (L,)
