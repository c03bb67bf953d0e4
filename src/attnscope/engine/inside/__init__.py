"""Inside: one head's arithmetic, the logit lens, the model's anatomy and its positional encodings."""
from attnscope.engine.lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "head_view": ["head_view", "HeadView"],
    "lens": ["logit_lens", "logit_lenses"],
    "traced": ["forward_trace"],
    "anatomy": ["parameter_table", "input_formula", "shape_walkthrough", "model_positions", "embedding_norms"],
    "offsets": ["rotation_check", "offset_errors", "paired", "frequencies", "RotationCheck"],
})
