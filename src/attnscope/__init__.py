"""attnscope: look inside an encoder-decoder Transformer while it translates."""
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.engine.capture import Recording, record_attention
from attnscope.engine.hf_generate import from_generate, generate_with_attention
from attnscope.engine.loading import import_model, load
from attnscope.engine.record import AttentionRecord, DecodeStep, StepAttention
from attnscope.engine.translator import InputError, Translation, Translator

__all__ = ["AttentionRecord", "CheckpointError", "DecodeStep", "InputError", "Recording", "StepAttention", "Translation",
           "Translator", "from_generate", "generate_with_attention", "import_model", "load", "record_attention"]
