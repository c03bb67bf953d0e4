"""attnscope: look inside an encoder-decoder Transformer while it translates."""
from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.engine.attribution.contrastive import Contrast
from attnscope.engine.attribution.sentence import attribute
from attnscope.engine.decoding.loading import import_model, load
from attnscope.engine.decoding.translator import InputError, Translation, Translator
from attnscope.engine.recording.capture import Recording, record_attention
from attnscope.engine.recording.hf_generate import from_generate, generate_with_attention
from attnscope.engine.recording.recorded import ModuleAttention
from attnscope.records.attention import AttentionRecord, DecodeStep, StepAttention

__all__ = ["AttentionRecord", "CheckpointError", "Contrast", "DecodeStep", "InputError", "ModuleAttention", "Recording",
           "StepAttention", "Translation", "Translator", "attribute", "from_generate", "generate_with_attention",
           "import_model", "load", "record_attention"]
