"""Tiny models of every variant, a source, and the target prefix the model itself decoded."""
from __future__ import annotations

from dataclasses import dataclass

from attnscope.engine.decoding.decode import Decoded, greedy
from attnscope.engine.inside.traced import forward_trace
from attnscope.engine.recording.tracer import trace
from attnscope.model.config import BOS_ID
from attnscope.model.transformer import Transformer
from attnscope.records.forward import ForwardTrace
from tests.engine_fixtures import T5, random_source, tiny_model

# post-LN (the paper's) and pre-LN, sinusoidal and learned positions, with or without a final norm, and T5's variants
VARIANTS = {
    "post-sinusoidal": dict(norm="post", positional="sinusoidal"),
    "pre-learned": dict(norm="pre", positional="learned"),
    "pre-sinusoidal-shared": dict(norm="pre", positional="sinusoidal", share_embeddings=True),
    "post-learned-final-norm": dict(norm="post", positional="learned", final_norm=True),
    "post-annotated-norm-unscaled": dict(norm="post", layer_norm="annotated", embed_scale=False),
    "t5": T5,  # relative position bias, RMS norm, unscaled scores, no biases, narrow heads
}


def inside_trace(model: Transformer, source: list[int], prefix: list[int], use_cache: bool) -> ForwardTrace:
    """What the inside view draws: the tracer's pass with everything kept, as numpy."""
    return forward_trace(trace(model, source, prefix, use_cache=use_cache))


@dataclass
class Case:
    model: Transformer
    source: list[int]
    decoded: Decoded  # greedy, cached, with every head recorded
    prefix: list[int]  # <bos> y1 .. y_{T-1}: the decoder inputs of the decoded output
    cached: ForwardTrace
    full: ForwardTrace


def make_case(name: str, seed: int = 0) -> Case:
    model = tiny_model(seed, **VARIANTS[name])
    source = random_source(seed, n=7)
    decoded = greedy(model, source, max_len=6)
    prefix = [BOS_ID, *decoded.ids[:-1]]
    return Case(model, source, decoded, prefix, inside_trace(model, source, prefix, True),
                inside_trace(model, source, prefix, False))
