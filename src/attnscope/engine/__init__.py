"""Running a model: capture, the attention record, decoding, beam search, the Translator, analysis."""
