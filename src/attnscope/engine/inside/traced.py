"""The inside view's plain data from a trace: `forward_trace` turns the tracer's `Trace` (torch tensors, batch first)
into the numpy `ForwardTrace` that figure builders draw (batch item 0, float32). A pure function: it computes
nothing the model did not, it only picks and converts."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from torch import Tensor

from attnscope.engine.recording.trace import EVERYTHING, Embedded, Sublayer, Trace, kept
from attnscope.engine.recording.tracer import trace
from attnscope.model.blocks import RMSNorm
from attnscope.model.transformer import Transformer
from attnscope.records.forward import ForwardTrace, StreamInputs, SublayerTrace


def _np(t: Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def forward_trace(trace: Trace) -> ForwardTrace:
    """Batch item 0 of a trace that kept everything, as numpy arrays."""
    trace.require(EVERYTHING)
    sublayers = {(s.kind, s.layer): _sublayer(s) for kind in ("encoder", "decoder", "cross") for s in trace.sublayers(kind)}
    block = trace.encoder[0].self_attn.block
    norm_kind = "RMSNorm" if isinstance(block.norm, RMSNorm) else "LayerNorm"
    relative = trace.encoder[0].module.relative_bias is not None
    return ForwardTrace(trace.source_ids, trace.target_ids, "pre" if block.pre else "post", norm_kind, relative,
                        trace.use_cache, _inputs(kept(trace.source)), _inputs(kept(trace.target)), _np(kept(trace.memory)[0]),
                        sublayers, np.stack([_np(kept(layer.output)[0]) for layer in trace.decoder]), _np(trace.logits[0]))


def sentence_trace(model: Transformer, source_ids: Sequence[int], decoder_inputs: Sequence[int]) -> ForwardTrace:
    """Everything the model computed for a translation (decoder inputs <bos> y1 .. y_{n-1}), from one teacher-forced
    pass under the causal mask: the decoder is causal, so every row equals its decoding step's to float32 noise
    (tests check the weights against the recorded decode), at a fraction of a step-by-step re-decode's cost (the
    output layer runs once as one product, not once a step). The caller holds the model's lock."""
    return forward_trace(trace(model, source_ids, decoder_inputs))


def _inputs(e: Embedded) -> StreamInputs:
    return StreamInputs(_np(e.token_embedding[0]), e.scale, _np(e.position), _np(e.total[0]))


def _sublayer(s: Sublayer) -> SublayerTrace:
    i, b = kept(s.internals), kept(s.stream)
    m = s.module
    scale = i.queries.shape[-1] ** -0.5 if m.scale_scores else 1.0  # as MultiHeadAttention.attend applies it
    bias = None if i.bias is None else _np(i.bias.expand(i.scores.shape)[0])
    return SublayerTrace(q=_np(i.queries[0]), k=_np(i.keys[0]), v=_np(i.values[0]), scores=_np(i.scores[0]), scale=scale,
                         bias=bias, weights=_np(kept(s.weights)[0]), concat=_np(i.concat[0]), output=_np(i.output[0]),
                         w_o=_np(m.out_proj.weight), b_o=None if m.out_proj.bias is None else _np(m.out_proj.bias),
                         residual=_np(b.residual[0]), norm_input=_np(b.norm_input[0]),
                         norm_output=_np(b.norm_output[0]), block_output=_np(b.output[0]))
