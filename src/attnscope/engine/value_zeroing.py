"""Value zeroing (Mohebbi et al., "Quantifying Context Mixing in Transformers", EACL 2023),
extended to the encoder-decoder: how much each generated token drew on the source and on the
target prefix, and on which source tokens.

Per layer, token j's share in query i's representation is the cosine distance between the
layer's real output for i and its output when j's value vector is zeroed in every head of one
attention module, rows normalised to sum to one. In a decoder layer the candidates are the
prefix (zeroed in self-attention) and the source (zeroed in cross-attention), normalised
together. Layers are composed by rollout (as the paper does for the whole model): a prefix
position carries what earlier layers mixed into it, a source position what the encoder mixed
into it, so every generated token's shares over source tokens plus target prefix sum to one.

Zeroing j's values changes query i's attention output by exactly -sum_h a^h_ij f_h(x_j) (the
weights do not change: keys are untouched), so each variant is the traced output minus that
vector, sent through the rest of the layer by the layer's own modules, all variants at once.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from attnscope.engine.capture import eval_mode, model_lock
from attnscope.engine.internals import LayerTrace, Trace, mixed_vectors, trace_pair
from attnscope.engine.translator import Translation, Translator
from attnscope.model.transformer import Transformer


@dataclass(frozen=True)
class ValueZeroing:
    """Value-zeroing context mixing of one sentence pair; rows sum to one."""

    encoder_layers: np.ndarray  # [L, S, S] per encoder layer
    decoder_layers: np.ndarray  # [L, T, S + T] per decoder layer: source columns, then prefix columns
    encoder_rollout: np.ndarray  # [S, S] encoder output over source tokens
    decoder_rollout: np.ndarray  # [T, S + T] whole model: generated token t over source and prefix

    @property
    def n_source(self) -> int:
        return self.encoder_rollout.shape[0]

    @property
    def source(self) -> np.ndarray:
        """[T, S] share of each source token in each generated token."""
        return self.decoder_rollout[:, : self.n_source]

    @property
    def prefix(self) -> np.ndarray:
        """[T, T] share of each decoder input (<bos> y1 ..) in each generated token (zero after t)."""
        return self.decoder_rollout[:, self.n_source:]

    @property
    def source_share(self) -> np.ndarray:
        """[T] how much each generated token relied on the source (the rest is the prefix)."""
        return self.source.sum(-1)


def _distance(reference: Tensor, variants: Tensor) -> Tensor:
    """Cosine distance between each query's output (Q, D) and its variants (Q, K, D): (Q, K)."""
    return 1.0 - torch.nn.functional.cosine_similarity(variants, reference.unsqueeze(1), dim=-1)


def _normalise(scores: Tensor) -> Tensor:
    total = scores.sum(-1, keepdim=True)
    return scores / torch.where(total > 0, total, torch.ones_like(total))


def _variants(base: Tensor, attn_out: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    """Block inputs repeated per zeroed key and the attention outputs without that key, each (1, Q*K, D)."""
    q, k, d = g.shape
    return base.unsqueeze(1).expand(q, k, d).reshape(1, q * k, d), (attn_out.unsqueeze(1) - g).reshape(1, q * k, d)


def encoder_layer_mixing(lt: LayerTrace) -> Tensor:
    """[S, S] value-zeroing scores of one encoder layer (unnormalised cosine distances)."""
    layer, x, call = lt.layer, lt.inputs[0], lt.self_attn
    s, d = x.shape
    base, attn = _variants(x, call.output[0], mixed_vectors(call))
    y = layer.ffn_block(layer.attn_block(base, lambda _h: attn), layer.ffn)  # (1, S*S, D)
    return _distance(lt.output[0], y.view(s, s, d))


def decoder_layer_mixing(lt: LayerTrace) -> tuple[Tensor, Tensor]:
    """Unnormalised scores of one decoder layer: ([T, S] source via cross-attention, [T, T] prefix via self-attention)."""
    layer, x, sa, ca = lt.layer, lt.inputs[0], lt.self_attn, lt.cross_attn
    t, d = x.shape
    s = ca.values.shape[2]
    cross = lambda h: ca.module(ca.module.project_q(h), ca.keys[:1], ca.values[:1], ca.mask)  # noqa: E731
    base, attn = _variants(x, sa.output[0], mixed_vectors(sa))
    y_self = layer.ffn_block(layer.cross_block(layer.self_block(base, lambda _h: attn), cross), layer.ffn)
    prefix = _distance(lt.output[0], y_self.view(t, t, d)).tril()  # a query never sees later positions
    x1 = layer.self_block(x.unsqueeze(0), lambda _h: sa.output[:1])[0]  # (T, D) input of the cross block
    base, attn = _variants(x1, ca.output[0], mixed_vectors(ca))
    y_cross = layer.ffn_block(layer.cross_block(base, lambda _h: attn), layer.ffn)
    return _distance(lt.output[0], y_cross.view(t, s, d)), prefix


def from_trace(model: Transformer, tr: Trace) -> ValueZeroing:
    """Value zeroing per layer and rolled out, from a traced single-sentence pass."""
    with model_lock(model), eval_mode(model), torch.no_grad():
        enc = [_normalise(encoder_layer_mixing(lt)) for lt in tr.encoder]
        dec = [_normalise(torch.cat(decoder_layer_mixing(lt), dim=-1)) for lt in tr.decoder]
    enc_np = [m.double().cpu().numpy() for m in enc]
    dec_np = [m.double().cpu().numpy() for m in dec]
    s = enc_np[0].shape[0]
    t = dec_np[0].shape[0]
    memory = np.eye(s)
    for mixing in enc_np:
        memory = mixing @ memory  # encoder output over source tokens
    memory_rows = np.hstack([memory, np.zeros((s, t))])  # source positions as rows over [source | prefix]
    rolled = np.hstack([np.zeros((t, s)), np.eye(t)])  # decoder input t is token t of the prefix
    for mixing in dec_np:
        rolled = mixing[:, s:] @ rolled + mixing[:, :s] @ memory_rows
    return ValueZeroing(np.stack(enc_np), np.stack(dec_np), memory, rolled)


def value_zeroing(translator: Translator, translation: Translation) -> ValueZeroing:
    """Value-zeroing contributions of a translation's output (teacher-forced on its own ids)."""
    with translator.inference():  # variants run the layers' modules: same weights as the traced pass
        tr = trace_pair(translator.model, translation.source_ids, translation.target_ids)
        return from_trace(translator.model, tr)
