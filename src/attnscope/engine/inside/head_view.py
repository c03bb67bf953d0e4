"""One head, one query: the steps of Eq. 1 and of multi-head attention (section 3.2), read off a ForwardTrace.

Every array either is a captured one sliced to this head and query (q, k, v, scores, weights, the
head's output, the attention output, the residual block) or an elementwise breakdown of a captured
step (q∘k and its sums; weight × value; the head's share of W_O). Tests prove each breakdown adds
up to the captured result.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnscope.model.kinds import Kind
from attnscope.records.attention import AttentionRecord
from attnscope.records.forward import ForwardTrace, StreamInputs, SublayerTrace


@dataclass(frozen=True)
class TokenInput:
    """How one position's first-layer input is made: token embedding × scale + positional encoding."""

    token_embedding: np.ndarray  # (D,)
    scale: float
    position: np.ndarray  # (D,)
    total: np.ndarray  # (D,)


@dataclass(frozen=True)
class HeadView:
    """Head `head` of `kind` attention in `layer`, for query position `query` (K keys, dh each head's width)."""

    kind: Kind
    layer: int
    head: int
    query: int
    query_tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    norm: str  # "post" or "pre": where the block's LayerNorm sits
    norm_kind: str  # "LayerNorm" or "RMSNorm" (T5's)
    relative: bool  # positions act as a bias on self-attention scores (T5): the embedding gets none
    embedding: TokenInput  # the query token's first-layer input (section 3.4 embedding + 3.5 encoding)
    layer_input: np.ndarray  # (D,) the residual stream entering this block at the query
    query_input: np.ndarray  # (D,) what W_Q multiplied (pre-LN: LN(layer_input))
    key_inputs: np.ndarray  # (K, D) what W_K and W_V multiplied (cross-attention: the encoder output)
    q: np.ndarray  # (dh,)
    k: np.ndarray  # (K, dh)
    products: np.ndarray  # (K, dh) q∘k, elementwise
    dots: np.ndarray  # (K,) q·k, the sums of the products
    scale: float  # 1/√d_k, or 1 where the model leaves it out (T5)
    bias: np.ndarray | None  # (K,) captured relative position bias added to q·k × scale (T5's self-attention); None: none
    scores: np.ndarray  # (K,) captured q·k × scale (+ bias), -inf where masked
    masked: np.ndarray  # (K,) True where the mask forbids the key
    mask_matrix: np.ndarray  # (Q, K) True where masked, for every query of this sublayer
    weights: np.ndarray  # (K,) captured softmax row
    v: np.ndarray  # (K, dh)
    weighted: np.ndarray  # (K, dh) weight × value, one row per key
    head_output: np.ndarray  # (dh,) captured: this head's slice of the concatenation (= weighted summed over keys)
    head_slice: tuple[int, int]  # [start, stop) of this head in the concatenation
    concat: np.ndarray  # (H·dh,) every head's output side by side (d_model, unless the heads have their own width)
    contributions: np.ndarray  # (H, D) each head's slice · its columns of W_O
    out_bias: np.ndarray | None  # (D,); None where W_O has no bias (T5)
    attention_output: np.ndarray  # (D,) captured output of the attention module (= contributions summed (+ bias))
    residual: np.ndarray  # (D,) block input x
    norm_input: np.ndarray  # (D,) what the LayerNorm read
    norm_output: np.ndarray  # (D,) what it returned
    block_output: np.ndarray  # (D,) what the block passed on

    @property
    def contribution(self) -> np.ndarray:
        """(D,) this head's part of the attention output."""
        return self.contributions[self.head]

    @property
    def recomputed_scores(self) -> np.ndarray:
        """(K,) the scores from the terms the page shows: q·k × scale (+ position bias), −∞ where masked."""
        terms = self.dots * np.float32(self.scale) + (0 if self.bias is None else self.bias)
        return np.where(self.masked, -np.inf, terms).astype(np.float32)

    @property
    def recomputed_weights(self) -> np.ndarray:
        """(K,) softmax of recomputed_scores: equals the captured weights (tests check it), so the steps shown are
        the model's own arithmetic."""
        z = self.recomputed_scores
        e = np.exp(z - z[~self.masked].max())
        return e / e.sum()

    @property
    def n_heads(self) -> int:
        return self.contributions.shape[0]

    def gap_to(self, record: AttentionRecord) -> float:
        """max |Δ| between this softmax row and the same row of `record` (the heatmap's, captured while translating)."""
        recorded = record.array(self.kind)[self.layer, self.head, self.query, : len(self.key_tokens)]
        return float(np.abs(self.weights - recorded).max())


def _token_input(inputs: StreamInputs, i: int) -> TokenInput:
    return TokenInput(inputs.token_embedding[i], inputs.scale, inputs.position[i], inputs.total[i])


def head_view(trace: ForwardTrace, kind: Kind, layer: int, head: int, query: int,
              source_tokens: tuple[str, ...], target_tokens: tuple[str, ...]) -> HeadView:
    """Slice one head and one query out of `trace`; tokens label the source and the target prefix."""
    s = trace.sublayer(kind, layer)
    n_heads, n_queries, dh = s.q.shape
    if not 0 <= head < n_heads:
        raise ValueError(f"this model has heads 0..{n_heads - 1}; asked for head {head}")
    if not 0 <= query < n_queries:
        raise ValueError(f"{kind} attention has query positions 0..{n_queries - 1}; asked for {query}")
    queries = source_tokens if kind == "encoder" else target_tokens
    keys = target_tokens if kind == "decoder" else source_tokens
    if (len(queries), len(keys)) != s.scores.shape[1:]:
        raise ValueError(f"{kind} attention has {n_queries} queries x {s.scores.shape[2]} keys, but the tokens give "
                         f"{len(queries)} x {len(keys)}: queries {list(queries)}, keys {list(keys)}")
    q, k, v = s.q[head, query], s.k[head], s.v[head]
    weights = s.weights[head, query]
    start, stop = head * dh, (head + 1) * dh
    heads = s.concat[query].reshape(n_heads, dh)  # (H, dh)
    contributions = np.einsum("hd,ohd->ho", heads, s.w_o.reshape(-1, n_heads, dh))  # (H, D): z_h · W_O[:, h]^T
    query_input = s.norm_output[query] if trace.norm == "pre" else s.residual[query]
    stream = trace.source if kind == "encoder" else trace.target
    return HeadView(
        kind=kind, layer=layer, head=head, query=query, query_tokens=tuple(queries), key_tokens=tuple(keys),
        norm=trace.norm, norm_kind=trace.norm_kind, relative=trace.relative, embedding=_token_input(stream, query),
        layer_input=s.residual[query], query_input=query_input, key_inputs=_key_inputs(trace, kind, s),
        q=q, k=k, products=q * k, dots=(q * k).sum(-1), scale=s.scale, bias=None if s.bias is None else s.bias[head, query],
        scores=s.scores[head, query], masked=~np.isfinite(s.scores[head, query]),
        mask_matrix=~np.isfinite(s.scores[head]), weights=weights, v=v, weighted=weights[:, None] * v,
        head_output=heads[head], head_slice=(start, stop), concat=s.concat[query], contributions=contributions,
        out_bias=s.b_o, attention_output=s.output[query], residual=s.residual[query], norm_input=s.norm_input[query],
        norm_output=s.norm_output[query], block_output=s.block_output[query])


def _key_inputs(trace: ForwardTrace, kind: Kind, s: SublayerTrace) -> np.ndarray:
    """(K, D) the vectors keys and values were projected from."""
    if kind == "cross":
        return trace.memory
    return s.norm_output if trace.norm == "pre" else s.residual
