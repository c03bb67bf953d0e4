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

The distances are ~1e-5, so the variants run on float64 copies of the layers (float32 rounding
moved shares by up to 1e-3 and made some negative), and the cosine distance is computed as
||a/|a| - b/|b|||^2 / 2, which is never negative. The rollout attributes nothing to a token's own
path through the residual stream, so its source/prefix split leans to the source at every layer
(see docs/attribution.md); ALTI+ (engine/attribution/alti.py) accounts for that path and gives the split.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attnscope.engine.attribution import exact_pass
from attnscope.engine.attribution.contributions import Contributions, Mixing
from attnscope.engine.attribution.norms import mixed_vectors
from attnscope.engine.attribution.registry import Method
from attnscope.engine.decoding.translator import Translation, Translator
from attnscope.engine.recording.trace import Layer, decoder_inputs, kept

METHOD = "value zeroing"


def _distance(reference: Tensor, variants: Tensor) -> Tensor:
    """Cosine distance between each query's output (Q, D) and its variants (Q, K, D): (Q, K), as half the
    squared distance of the unit vectors (equal to 1 - cos, without its cancellation; never negative)."""
    unit = torch.nn.functional.normalize
    return 0.5 * (unit(variants, dim=-1) - unit(reference, dim=-1).unsqueeze(1)).pow(2).sum(-1)


def _normalise(scores: Tensor) -> Tensor:
    total = scores.sum(-1, keepdim=True)
    return scores / torch.where(total > 0, total, torch.ones_like(total))


def _variants(base: Tensor, attn_out: Tensor, g: Tensor) -> tuple[Tensor, Tensor]:
    """Block inputs repeated per zeroed key and the attention outputs without that key, each (1, Q*K, D)."""
    q, k, d = g.shape
    return base.unsqueeze(1).expand(q, k, d).reshape(1, q * k, d), (attn_out.unsqueeze(1) - g).reshape(1, q * k, d)


def encoder_layer_mixing(lt: Layer) -> Tensor:
    """[S, S] value-zeroing scores of one encoder layer (unnormalised cosine distances)."""
    layer, x, out, call = lt.module, kept(lt.inputs)[0], kept(lt.output)[0], lt.self_attn
    s, d = x.shape
    base, attn = _variants(x, kept(call.internals).output[0], mixed_vectors(call))
    y = layer.ffn_block(layer.attn_block(base, lambda _h: attn), layer.ffn)  # (1, S*S, D)
    return _distance(out, y.view(s, s, d))


def decoder_layer_mixing(lt: Layer) -> tuple[Tensor, Tensor]:
    """Unnormalised scores of one decoder layer: ([T, S] source via cross-attention, [T, T] prefix via self-attention)."""
    layer, x, out, sa, ca = lt.module, kept(lt.inputs)[0], kept(lt.output)[0], lt.self_attn, kept(lt.cross_attn)
    sa_out, ci = kept(sa.internals).output, kept(ca.internals)
    t, d = x.shape
    s = ci.values.shape[2]

    def cross(h: Tensor) -> Tensor:  # the traced keys and values of the source, queried from h
        return ca.module(ca.module.project_q(h), ci.keys[:1], ci.values[:1], ci.mask)[0]

    base, attn = _variants(x, sa_out[0], mixed_vectors(sa))
    y_self = layer.ffn_block(layer.cross_block(layer.self_block(base, lambda _h: attn), cross), layer.ffn)
    prefix = _distance(out, y_self.view(t, t, d)).tril()  # a query never sees later positions
    x1 = layer.self_block(x.unsqueeze(0), lambda _h: sa_out[:1])[0]  # (T, D) input of the cross block
    base, attn = _variants(x1, ci.output[0], mixed_vectors(ca))
    y_cross = layer.ffn_block(layer.cross_block(base, lambda _h: attn), layer.ffn)
    return _distance(out, y_cross.view(t, s, d)), prefix


def _numpy(scores: Tensor) -> np.ndarray:
    return _normalise(scores).double().cpu().numpy()


MIXING = Mixing(METHOD, lambda lt: _numpy(encoder_layer_mixing(lt)),
                lambda lt: _numpy(torch.cat(decoder_layer_mixing(lt), dim=-1)))


def value_zeroing(translator: Translator, translation: Translation) -> Contributions:
    """Value-zeroing contributions of a translation's output (teacher-forced on its own ids), in float64 one layer at
    a time (exact_pass.py: the variants run that layer's float64 modules)."""
    model = translator.model
    return exact_pass.contributions(model, translation.source_ids,
                                    decoder_inputs(translation.target_ids, model.config.bos_id), [MIXING])[0]


ATTRIBUTIONS = (
    Method(METHOD, "how far each output representation moves when one token's values are zeroed, rolled out",
           exact=True, cost="one traced forward pass in float64, then each token's variants through each layer",
           order=3,
           explanation="**Value zeroing** (Mohebbi et al., \"Quantifying Context Mixing in Transformers\", EACL "
                       "2023). A token's value vectors are zeroed in one layer and the change of every output "
                       "representation (cosine distance) is its share, checkable by re-running the model; composed "
                       "over layers it ranks source tokens, but it never credits a token's own residual path, so its "
                       "split puts nearly everything on the source.",
           compute=lambda inputs: inputs.exact[1], source_map=lambda c, _layer: c.source,
           mixing=MIXING),
)
