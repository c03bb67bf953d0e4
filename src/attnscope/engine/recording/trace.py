"""What the tracer keeps of one forward pass of attnscope's model, as torch tensors: `Keep` says what (the weights of
every head, each attention call's internals, the residual stream), `Trace` holds it layer by layer."""
from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Sequence, TypeVar

from torch import Tensor

from attnscope.model.attention import MultiHeadAttention
from attnscope.model.blocks import Residual
from attnscope.model.kinds import Kind
from attnscope.model.layers import DecoderLayer, EncoderLayer

T = TypeVar("T")


@dataclass(frozen=True)
class Keep:
    """What a trace keeps: `weights` the softmaxed weights (B, H, Q, K) of every head; `internals` each attention
    call's q, k, v, scores, mask, concatenated heads and output; `stream` the residual stream (embeddings,
    positions, each layer's input and output, each attention block's input, LayerNorm input and output, output)."""

    weights: bool = True
    internals: bool = False
    stream: bool = False

    def covers(self, other: "Keep") -> bool:
        """Whether a trace that kept this keeps everything `other` asks for."""
        return all(mine or not theirs for mine, theirs in zip(astuple(self), astuple(other)))


WEIGHTS = Keep()
EVERYTHING = Keep(weights=True, internals=True, stream=True)


@dataclass(frozen=True)
class Internals:
    """What one attention sublayer computed between its projections and its output (Keep.internals)."""

    queries: Tensor  # (B, H, Q, dh)
    keys: Tensor  # (B, H, K, dh)
    values: Tensor  # (B, H, K, dh)
    scores: Tensor  # (B, H, Q, K) what the softmax read: q·k/√dh (q·k where config.scale_scores is off, as in T5)
    #   plus the stack's relative position bias in self-attention (positional "relative", T5), -inf where masked
    mask: Tensor | None  # True where allowed, broadcastable to (B, H, Q, K); None: every key everywhere
    concat: Tensor  # (B, Q, D) the heads' outputs side by side: the input of W_O
    output: Tensor  # (B, Q, D) after the output projection
    bias: Tensor | None = None  # (1, H, Q, K) the relative position bias the call added to q·k (T5's self-attention),
    #   as the stack handed it; None without one


@dataclass(frozen=True)
class BlockStream:
    """The residual block around one attention sublayer (Keep.stream)."""

    residual: Tensor  # (B, Q, D) the block's input x
    norm_input: Tensor  # (B, Q, D) what its LayerNorm read
    norm_output: Tensor  # (B, Q, D) what the LayerNorm returned
    output: Tensor  # (B, Q, D) post-LN: LN(x + attn); pre-LN: x + attn(LN(x))


@dataclass(frozen=True)
class Sublayer:
    """One attention sublayer over the whole pass; with the KV cache its steps are joined along the queries
    (keys a step had not computed yet are future positions: score -inf, weight 0, mask False)."""

    kind: Kind
    layer: int
    module: MultiHeadAttention
    block: Residual
    weights: Tensor | None  # (B, H, Q, K) after the softmax (Keep.weights)
    internals: Internals | None
    stream: BlockStream | None


@dataclass(frozen=True)
class Layer:
    """One encoder or decoder layer: its input and output (Keep.stream) and its attention sublayers."""

    module: EncoderLayer | DecoderLayer
    inputs: Tensor | None  # (B, N, D)
    output: Tensor | None  # (B, N, D)
    self_attn: Sublayer
    cross_attn: Sublayer | None = None  # decoder layers only


@dataclass(frozen=True)
class Embedded:
    """What a stack's first layer reads (Keep.stream): token embedding × scale + positional encoding."""

    token_embedding: Tensor  # (B, N, D) rows of the embedding table, before scaling
    scale: float  # the model's embedding_scale: √d_model, or 1 for a model that does not scale (config.embed_scale)
    position: Tensor  # (N, D) positional encodings of positions 0..N-1; zeros without absolute positions (T5's
    #   positions are the bias in Internals.scores)
    total: Tensor  # (B, N, D) the sum the first layer reads (embedding dropout is off in eval)


@dataclass(frozen=True)
class Trace:
    """One teacher-forced pass of a source and a decoder input (<bos> y1 .. y_t) through the whole model."""

    source_ids: tuple[int, ...]
    target_ids: tuple[int, ...]  # the decoder's inputs
    keep: Keep
    use_cache: bool
    encoder: tuple[Layer, ...]
    decoder: tuple[Layer, ...]
    logits: Tensor  # (B, T, V) next-token logits at every target position
    source: Embedded | None  # Keep.stream
    target: Embedded | None
    memory: Tensor | None  # (B, S, D) the encoder's output (after its final norm, if any), Keep.stream

    def sublayer(self, kind: Kind, layer: int) -> Sublayer:
        return self.sublayers(kind)[layer]

    def sublayers(self, kind: Kind) -> list[Sublayer]:
        """The attention sublayers of one kind, in layer order."""
        if kind == "encoder":
            return [layer.self_attn for layer in self.encoder]
        if kind == "decoder":
            return [layer.self_attn for layer in self.decoder]
        return [layer.cross_attn for layer in self.decoder if layer.cross_attn is not None]

    def require(self, keep: Keep) -> "Trace":
        """This trace, if it kept what `keep` asks for (else a ValueError that says what to trace with)."""
        if not self.keep.covers(keep):
            raise ValueError(f"this trace kept {self.keep}; the caller needs {keep}")
        return self


def kept(value: T | None) -> T:
    """A part of a trace that its flags kept; a ValueError for one they left out (`Trace.require` says which)."""
    if value is None:
        raise ValueError("this part was not kept by the trace's flags (Keep)")
    return value


def decoder_inputs(target_ids: Sequence[int], bos_id: int) -> list[int]:
    """<bos> y1 .. y_{T-1}: what the decoder reads while choosing y1 .. yT (bos_id: the model config's)."""
    return [bos_id, *list(target_ids)[:-1]]
