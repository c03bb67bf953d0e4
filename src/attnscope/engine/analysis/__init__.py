"""Analysis: head statistics over a dataset, ablation, rollout, and word alignment."""
from attnscope.engine.lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "heads": ["head_stats", "head_stats_delta", "head_stats_over", "ablate_sentence", "ablation_bleu", "rollout",
                 "source_alignment", "AblationResult", "STAT_DEFINITIONS"],
    "dataset": ["head_stats_batched", "shares_by_position"],
    "alignment": ["align", "WordAlignment"],
    "head_gate": ["gate_heads", "HeadKey"],
    "bleu": ["scores"],
})
