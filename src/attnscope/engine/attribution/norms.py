"""Norm-based attention (Kobayashi et al., "Attention is Not Only a Weight", EMNLP 2020).

A weight a_ij says where a head looks; ||a_ij f(x_j)|| says how much it actually moves: f is
the value projection followed by the head's slice of the output projection W_O. A head that
puts 0.9 on a token whose transformed value is nearly zero passes on almost nothing.
Everything here is computed from a traced forward pass (engine.internals), not re-implemented.
"""
from __future__ import annotations

import numpy as np
import torch

from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.recording.internals import AttentionCall, Trace, head_vectors, mixed_vectors, trace_pair
from attnscope.engine.recording.record import AttentionRecord, Kind


def head_norms(call: AttentionCall) -> torch.Tensor:
    """||a^h_ij f_h(x_j)|| per head, (B, H, Q, K): the weights scaled by each value's transformed norm."""
    return call.weights * head_vectors(call).norm(dim=-1).unsqueeze(2)  # (B, H, Q, K)


def _calls(trace: Trace, kind: Kind) -> list[AttentionCall]:
    if kind == "encoder":
        return [layer.self_attn for layer in trace.encoder]
    if kind == "decoder":
        return [layer.self_attn for layer in trace.decoder]
    return [layer.cross_attn for layer in trace.decoder]  # type: ignore[misc]


def norm_arrays(trace: Trace, kind: Kind) -> np.ndarray:
    """Per-head weighted value norms of one kind, [B, L, H, Q, K] (shaped like the weights)."""
    return torch.stack([head_norms(c) for c in _calls(trace, kind)], dim=1).float().cpu().numpy()


def layer_norms(trace: Trace, kind: Kind, batch: int = 0) -> np.ndarray:
    """||sum_h a^h_ij f_h(x_j)||, the whole layer's norm-based attention, [L, Q, K] (Kobayashi et al., sec. 5)."""
    return torch.stack([mixed_vectors(c, batch).norm(dim=-1) for c in _calls(trace, kind)]).float().cpu().numpy()


def norm_record(trace: Trace, like: AttentionRecord, batch: int = 0) -> AttentionRecord:
    """An AttentionRecord of weighted value norms with the tokens (and axes) of `like`."""
    arrays = {kind: norm_arrays(trace, kind)[batch] for kind in ("encoder", "decoder", "cross")}
    return AttentionRecord(like.source_tokens, like.target_tokens, **arrays)


def weighted_value_norms(translator: Translator, translation: Translation) -> AttentionRecord:
    """Norm-based attention of a translation, every kind, layer and head, on the axes of its weights.

    The translation is teacher-forced on its own output, which computes exactly what cached
    decoding computed at each step (a tested parity), so the norms belong to the weights shown.
    """
    if translation.attention is None:
        raise ValueError("the translation carries no attention; translate with capture=True")
    with translator.inference():  # the norms read W_O too: same weights as the traced pass
        t = trace_pair(translator.model, translation.source_ids, translation.target_ids)
        return norm_record(t, translation.attention)
