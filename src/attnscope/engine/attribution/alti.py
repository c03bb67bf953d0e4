"""ALTI+ (Ferrando et al., "Towards Opening the Black Box of Neural Machine Translation: Source and
Target Interpretations of the Transformer", EMNLP 2022), built on ALTI (Ferrando et al., "Measuring
the Mixing of Contextual Information in the Transformer", EMNLP 2022).

An attention block's output for query i is a sum of one vector per input, the residual included:
y_i = sum_j T_i(x_j) (+ constant biases), where T_i(x_j) = sum_h a^h_ij f_h(x_j) (the head-mixed
value of token j through W_O), plus x_i itself for j = i in self-attention; in cross-attention the
residual x_i (the decoder token's own state) is one more input beside the source tokens. With
post-LN blocks the LayerNorm (or T5's RMSNorm, which subtracts no mean) is applied to each vector with
the output's own scale, so the sum is still exact. The weights are the model's own (T5's position
bias and unscaled scores included): nothing here depends on how the scores were made. Token j's
contribution is how close its vector is to the output in Manhattan distance,
c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows normalised to sum to one.

The encoder's layers are rolled out; in decoder layer l the cross-attention row splits token t
between the source tokens and its residual, and the residual's share scales the self-attention
row (prefix positions, again with the residual); layers are rolled out with the encoder's rollout
under the source columns (the reference implementation's `get_contribution_rollout`). The
feed-forward blocks act on each position alone and are left out, as in the paper.
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
from attnscope.engine.recording.trace import Layer, Sublayer, decoder_inputs, kept
from attnscope.model.blocks import Residual, RMSNorm

METHOD = "ALTI+"


def _centred(norm: torch.nn.Module, z: Tensor) -> Tensor:
    """What the norm scales: z minus its mean for LayerNorm, z itself for RMSNorm (T5's subtracts no mean)."""
    return z if isinstance(norm, RMSNorm) else z - z.mean(-1, keepdim=True)


def _layer_norm_scale(norm: torch.nn.Module, z: Tensor) -> Tensor:
    """s_i with norm(z_i) = gamma * centred(z_i) * s_i (+ beta; RMSNorm has none), (N, 1): read off the module's own
    output (a projection, so it works for every norm variant without dividing by gamma's entries)."""
    shape = norm.weight * _centred(norm, z)  # (N, D)
    shifted = norm(z) - norm.bias if getattr(norm, "bias", None) is not None else norm(z)
    return (shifted * shape).sum(-1, keepdim=True) / (shape * shape).sum(-1, keepdim=True)


def _through_block(block: Residual, residual: Tensor, call: Sublayer, vectors: Tensor) -> tuple[Tensor, Tensor]:
    """The block's real output y (Q, D), and each input's vector T_i(x_j) (Q, K, D) carried to it: the norm is linear
    in its input at the output's own scale, so each vector goes through it alone (no bias, which is no token's)."""
    output = kept(call.internals).output
    y = block(residual.unsqueeze(0), lambda _h: output[:1])[0]  # the layer's own Residual module
    if block.pre:
        return y, vectors  # y = sum_j T_i(x_j) (+ b_O)
    z = residual + output[0]  # the norm's input
    return y, block.norm.weight * _centred(block.norm, vectors) * _layer_norm_scale(block.norm, z).unsqueeze(1)


def _alti(y: Tensor, vectors: Tensor) -> Tensor:
    """c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows normalised, (Q, K)."""
    closeness = (y.abs().sum(-1, keepdim=True) - (y.unsqueeze(1) - vectors).abs().sum(-1)).clamp(min=0)
    total = closeness.sum(-1, keepdim=True)
    return closeness / torch.where(total > 0, total, torch.ones_like(total))


def self_block(block: Residual, x: Tensor, call: Sublayer) -> tuple[Tensor, Tensor]:
    """Contributions (Q, Q) of a self-attention block on input x (Q, D), and its output (Q, D)."""
    eye = torch.eye(x.shape[0], dtype=x.dtype, device=x.device).unsqueeze(-1)  # (Q, Q, 1)
    vectors = mixed_vectors(call) + eye * x.unsqueeze(1)  # the residual x_i joins T_i(x_i): (Q, Q, D)
    y, carried = _through_block(block, x, call, vectors)
    return _alti(y, carried), y


def cross_block(block: Residual, x: Tensor, call: Sublayer) -> tuple[Tensor, Tensor]:
    """Contributions (Q, S + 1) of a cross-attention block (source tokens, then the residual x_i), and its output."""
    vectors = torch.cat([mixed_vectors(call), x.unsqueeze(1)], dim=1)  # (Q, S + 1, D)
    y, carried = _through_block(block, x, call, vectors)
    return _alti(y, carried), y


def encoder_layer(lt: Layer) -> Tensor:
    """[S, S] ALTI of one encoder layer's self-attention block (the feed-forward block mixes no tokens)."""
    return self_block(lt.self_attn.block, kept(lt.inputs)[0], lt.self_attn)[0]


def decoder_layer(lt: Layer) -> tuple[Tensor, Tensor]:
    """([T, T] self-attention block, [T, S + 1] cross-attention block) of one decoder layer."""
    prefix, h = self_block(lt.self_attn.block, kept(lt.inputs)[0], lt.self_attn)
    cross = kept(lt.cross_attn)
    return prefix, cross_block(cross.block, h, cross)[0]


def decoder_mixing(lt: Layer) -> np.ndarray:
    """[T, S + T] of one decoder layer: the cross block's source shares, then its residual share spread over the
    prefix by the self-attention block (ALTI+'s composition of the two blocks)."""
    prefix, cross = (m.double().cpu().numpy() for m in decoder_layer(lt))
    return np.concatenate([cross[:, :-1], cross[:, -1:] * prefix], axis=-1)


MIXING = Mixing(METHOD, lambda lt: encoder_layer(lt).double().cpu().numpy(), decoder_mixing)


def alti_plus(translator: Translator, translation: Translation) -> Contributions:
    """ALTI+ contributions of a translation's output (teacher-forced on its own ids), computed in float64 one layer
    at a time (exact_pass.py)."""
    model = translator.model
    return exact_pass.contributions(model, translation.source_ids,
                                    decoder_inputs(translation.target_ids, model.config.bos_id), [MIXING])[0]


ATTRIBUTIONS = (
    Method(METHOD, "each source and prefix token's share in each generated token, every block split exactly "
                   "and rolled out, residual paths included", exact=True,
           cost="one traced forward pass in float64", order=2,
           explanation="**ALTI+** (Ferrando et al., \"Towards Opening the Black Box of Neural Machine Translation: "
                       "Source and Target Interpretations of the Transformer\", EMNLP 2022). Each attention block's "
                       "output is split exactly into one vector per input token, the token's own residual path "
                       "included, and a token's share is how close its vector is to the output (Manhattan distance); "
                       "the shares are composed over layers, the encoder's under the source tokens, so each generated "
                       "token's source and prefix shares sum to one and give the split.",
           compute=lambda inputs: inputs.exact[0], source_map=lambda c, _layer: c.source,
           mixing=MIXING),
)
