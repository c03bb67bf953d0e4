"""attnscope: look inside an encoder-decoder Transformer while it translates."""
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.engine.capture import record_attention
from attnscope.engine.loading import load
from attnscope.engine.record import AttentionRecord, DecodeStep, StepAttention
from attnscope.engine.translator import InputError, Translation, Translator

__all__ = ["AttentionRecord", "CheckpointError", "DecodeStep", "InputError", "Translation", "Translator",
           "StepAttention", "load", "record_attention"]
