"""Norm-based attention (Kobayashi et al., "Attention is Not Only a Weight", EMNLP 2020).

A weight a_ij says where a head looks; ||a_ij f(x_j)|| says how much it actually moves: f is
the value projection followed by the head's slice of the output projection W_O. A head that
puts 0.9 on a token whose transformed value is nearly zero passes on almost nothing.
Everything here is computed from a traced forward pass (recording/tracer.py), not re-implemented.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attnscope.engine.attribution.registry import Inputs, Method
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.recording.trace import Keep, Sublayer, Trace, decoder_inputs, kept
from attnscope.engine.recording.tracer import trace
from attnscope.records.attention import AttentionRecord, Kind

# What the norms read: the weights and each call's values (W_O comes from the module itself).
NEEDS = Keep(weights=True, internals=True)
ATTENTION = "attention"
NORM = "norm-based"


def head_vectors(call: Sublayer) -> Tensor:
    """f_h(x_j): each key's value pushed through its head's slice of W_O, (B, H, K, D).

    The attention output is sum_h sum_j a^h_ij f_h(x_j) + b_O, so these are the vectors the
    weights actually mix (Kobayashi et al. 2020, eq. 6). They come from the module's own output
    projection (each head's values alone in its slot, minus the bias if any), through its hook point, so a head
    switched off by `head_gate.gate_heads` contributes zero vectors here too.
    """
    m, values = call.module, kept(call.internals).values
    b, h, k, dh = values.shape
    eye = torch.eye(h, dtype=values.dtype, device=values.device)
    alone = torch.einsum("bhkd,hg->bhkgd", values, eye).reshape(b, h, k, h * dh)  # head h's values in slot h
    with torch.no_grad():  # its bias, where it has one (T5's W_O has none), belongs to no key
        out = m.project_out(alone)
        return out if m.out_proj.bias is None else out - m.out_proj.bias  # (B, H, K, D)


def mixed_vectors(call: Sublayer, batch: int = 0) -> Tensor:
    """g_ij = sum_h a^h_ij f_h(x_j): what key j adds to query i's attention output, (Q, K, D)."""
    return torch.einsum("hqk,hkd->qkd", kept(call.weights)[batch], head_vectors(call)[batch])


def head_norms(call: Sublayer) -> Tensor:
    """||a^h_ij f_h(x_j)|| per head, (B, H, Q, K): the weights scaled by each value's transformed norm."""
    return kept(call.weights) * head_vectors(call).norm(dim=-1).unsqueeze(2)  # (B, H, Q, K)


def norm_arrays(trace: Trace, kind: Kind) -> np.ndarray:
    """Per-head weighted value norms of one kind, [B, L, H, Q, K] (shaped like the weights)."""
    calls = trace.require(NEEDS).sublayers(kind)
    return torch.stack([head_norms(c) for c in calls], dim=1).float().cpu().numpy()


def layer_norms(trace: Trace, kind: Kind, batch: int = 0) -> np.ndarray:
    """||sum_h a^h_ij f_h(x_j)||, the whole layer's norm-based attention, [L, Q, K] (Kobayashi et al., sec. 5)."""
    calls = trace.require(NEEDS).sublayers(kind)
    return torch.stack([mixed_vectors(c, batch).norm(dim=-1) for c in calls]).float().cpu().numpy()


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
        model = translator.model
        t = trace(model, translation.source_ids, decoder_inputs(translation.target_ids, model.config.bos_id), keep=NEEDS)
        return norm_record(t, translation.attention)


def _cross_norms(inputs: Inputs) -> np.ndarray:
    return layer_norms(inputs.traced, "cross")


ATTRIBUTIONS = (
    Method(ATTENTION, "the cross-attention weights of one decoder layer, mean of heads", exact=True,
           cost="none: recorded while translating", order=0, reference=False, per_layer=True,
           explanation="**Raw attention.** The softmax weights of cross-attention: how strongly a decoder query looks "
                       "at each source token. A weight is where a head looks, not what it passes on (Vaswani et al., "
                       "\"Attention Is All You Need\", 2017).",
           compute=lambda inputs: inputs.translation.attention,
           source_map=lambda record, layer: record.mean_over_heads("cross", layer).astype(np.float64)),
    Method(NORM, "||sum_h a^h_ij f_h(x_j)||: what one decoder layer's cross-attention moves from each source token",
           exact=True, cost="one traced forward pass", order=1, reference=False, per_layer=True,
           explanation="**Norm-based attention** (Kobayashi et al., \"Attention is Not Only a Weight: Analyzing "
                       "Transformers with Vector Norms\", EMNLP 2020). Each weight is multiplied by the norm of what "
                       "the head actually adds for that token (its value vector through the head's slice of the output "
                       "projection), so a 0.9 weight on a near-zero vector counts for little.",
           compute=_cross_norms, source_map=lambda norms, layer: norms[layer].astype(np.float64)),
)
