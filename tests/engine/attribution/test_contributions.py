"""Contributions and how a method reads a traced layer (Mixing): a trace that left out what the methods read is
refused with a sentence naming what to trace with, never read as missing numbers."""
from __future__ import annotations

import pytest

from attnscope.engine.attribution import alti
from attnscope.engine.recording.trace import WEIGHTS, decoder_inputs
from attnscope.engine.recording.tracer import trace
from tests.attribution_fixtures import pair, tiny


def test_a_trace_without_the_internals_and_stream_is_refused() -> None:
    model = tiny(1)
    src, tgt = pair(1)
    traced = trace(model, src, decoder_inputs(tgt, model.config.bos_id), keep=WEIGHTS)
    with pytest.raises(ValueError, match="the caller needs"):
        alti.MIXING.from_trace(traced)
