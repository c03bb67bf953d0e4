"""Tiny models and an independent teacher-forced runner for the attribution tests.

Import explicitly; nothing here is collected as tests. The runner uses only its own hooks,
never the tracer (engine/recording/tracer.py), so the attribution code is checked against a separate path.
"""
from __future__ import annotations

from contextlib import ExitStack
from typing import Callable

import torch
from torch import Tensor

from attnscope.engine.recording.trace import decoder_inputs
from attnscope.model.config import EOS_ID, ModelConfig
from attnscope.model.transformer import Transformer

# T5's variants (tests/engine_fixtures.T5 without its ids, which these vocabularies differ from): relative position bias,
# RMS norm before each sublayer, unscaled scores, no biases, gated GELU, heads narrower than d_model / n_heads
T5_PARTS = dict(positional="relative", relative_buckets=8, relative_max_distance=5, ffn="gated", activation="gelu_tanh",
                qkv_bias=False, out_bias=False, ffn_bias=False, scale_scores=False, embed_scale=False, d_head=6)
T5_MODEL = dict(T5_PARTS, norm="pre", layer_norm="rms")


def tiny(seed: int, **kw) -> Transformer:
    """A random tiny model in float64 (finite differences and tight tolerances need the precision)."""
    torch.manual_seed(seed)
    cfg = dict(src_vocab_size=23, tgt_vocab_size=29, d_model=16, n_heads=4, d_ff=32, n_encoder_layers=2,
               n_decoder_layers=2, dropout=0.0, attention_dropout=0.0, max_len=40)
    cfg.update(kw)
    return Transformer(ModelConfig(**cfg)).double().eval()


def pair(seed: int, n_src: int = 6, n_tgt: int = 5) -> tuple[list[int], list[int]]:
    g = torch.Generator().manual_seed(100 + seed)
    src = torch.randint(4, 23, (n_src,), generator=g).tolist() + [EOS_ID]
    tgt = torch.randint(4, 29, (n_tgt,), generator=g).tolist() + [EOS_ID]
    return src, tgt


def run(model: Transformer, src_ids: list[int], tgt_ids: list[int],
        values_edit: dict[torch.nn.Module, Callable[[Tensor], Tensor]] | None = None) -> tuple[Tensor, dict]:
    """Logits (T, V) and every layer's (input, output) of one teacher-forced pass; `values_edit`
    rewrites the value vectors an attention module receives (e.g. zeroes one token's)."""
    layers: dict = {}
    with ExitStack() as stack, torch.no_grad():
        for m in list(model.encoder) + list(model.decoder):
            stack.callback(m.register_forward_hook(lambda mod, a, out: layers.__setitem__(mod, (a[0][0], out[0][0]))).remove)
        for module, edit in (values_edit or {}).items():
            def pre(_m, args, edit=edit):
                return (args[0], args[1], edit(args[2]), *args[3:])
            stack.callback(module.register_forward_pre_hook(pre).remove)
        logits = model(torch.tensor([src_ids]), torch.tensor([decoder_inputs(tgt_ids, model.config.bos_id)]))[0]
    return logits, layers
