"""Decoding: greedy, forced and beam search, the `Translator` that records while it decodes, and `load`."""
from attnscope.engine.lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "translator": ["Translator", "Translation", "InputError"],
    "streaming": ["TranslationStream", "StreamStep"],
    "beam_streaming": ["BeamStream", "BeamStreamStep"],
    "loading": ["load", "import_model"],
    "decode": ["greedy", "greedy_batch", "teacher_force", "Decoded"],
    "beam": ["beam_search", "beam_search_batch"],
    "beam_result": ["BeamResult"],
    "domain": ["input_notes", "output_notes", "target_language_note"],
})
