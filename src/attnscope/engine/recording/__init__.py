"""Recording: what every attention head computed, from any model, into one `AttentionRecord`; and the tracer of
attnscope's own model, which keeps what one forward pass computed (weights, internals, residual stream)."""
from attnscope.engine.lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "capture": ["record_attention", "Recording"],
    "tracer": ["trace", "tracing", "install", "Calls"],
    "trace": ["Trace", "Keep", "WEIGHTS", "EVERYTHING", "Sublayer", "Layer", "Internals", "BlockStream", "Embedded",
              "decoder_inputs", "kept"],
    "sharing": ["eval_mode", "model_lock"],
    "steps": ["join_steps"],
    "record_files": ["read_record", "record_meta"],
    "hf_generate": ["generate_with_attention"],
})
