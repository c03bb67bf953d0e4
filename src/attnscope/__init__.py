"""attnscope: look inside an encoder-decoder Transformer while it translates."""
from attnscope.capture import record_attention
from attnscope.checkpoint import CheckpointError
from attnscope.loading import load
from attnscope.record import AttentionRecord, DecodeStep
from attnscope.translator import InputError, Translation, Translator

__all__ = ["AttentionRecord", "CheckpointError", "DecodeStep", "InputError", "Translation", "Translator",
           "load", "record_attention"]
