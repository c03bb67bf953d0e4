"""The settings a live model keeps in its objects: heads, norm placement, LayerNorm eps, activation, and the
embedding scale (read by running the small module that wraps the embedding table)."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from attnscope.checkpoints.checkpoint import CheckpointError
from attnscope.checkpoints.importers.state_dict_layout import Layout


def read_settings(module: nn.Module, layout: Layout) -> dict[str, Any]:
    """The hidden settings a live model holds in its objects (heads, norms, activation, embedding scale)."""
    read: dict[str, Any] = {}
    for m in module.modules():
        if isinstance(m, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
            read.setdefault("n_heads", m.self_attn.num_heads)
            read.setdefault("norm_first", bool(m.norm_first))
            read.setdefault("norm_eps", float(m.norm1.eps))
            act = m.activation
            name = getattr(act, "__name__", type(act).__name__).lower()
            if "gelu" in name or "relu" in name:
                read.setdefault("activation", "gelu" if "gelu" in name else "relu")
        elif hasattr(m, "linears") and isinstance(getattr(m, "h", None), int):
            read.setdefault("n_heads", m.h)
        elif hasattr(m, "a_2") and isinstance(getattr(m, "eps", None), float):
            read.setdefault("norm_eps", m.eps)
    scale = _embedding_scale(module, layout)
    if scale is not None:
        read["embed_scale"] = scale
    return read


@torch.no_grad()
def _embedding_scale(module: nn.Module, layout: Layout) -> bool | None:
    """Run the module that wraps the source embedding table (TokenEmbedding, Embeddings): x1 or x sqrt(d)?"""
    owner = layout.embedding_keys[0].rsplit(".", 2)
    if len(owner) < 3:
        return None
    try:
        wrapper = module.get_submodule(owner[0])
        table = wrapper.get_submodule(owner[1])
    except AttributeError:
        return None
    if not isinstance(table, nn.Embedding) or isinstance(wrapper, (nn.Sequential, nn.ModuleList)) or wrapper is module:
        return None
    ids = torch.arange(min(4, table.num_embeddings), device=table.weight.device).unsqueeze(0)
    was_training = wrapper.training
    try:
        wrapper.eval()
        out = wrapper(ids)
    except Exception:  # the wrapper's forward wants other arguments: nothing can be read
        return None
    finally:
        wrapper.train(was_training)
    raw = table(ids)
    if not isinstance(out, Tensor) or out.shape != raw.shape:
        return None
    for scaled, factor in ((True, math.sqrt(layout.d_model)), (False, 1.0)):
        if torch.allclose(out, raw * factor, rtol=1e-4, atol=1e-6):
            return scaled
    raise CheckpointError(f"{owner[0]} scales its embeddings by neither sqrt(d_model) nor 1; attnscope cannot import it: "
                          "record its attention in your code with attnscope.record_attention(model)")

