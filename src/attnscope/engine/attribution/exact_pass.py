"""The float64 pass behind ALTI+ and value zeroing, one layer at a time.

Value zeroing compares outputs that differ by ~1e-5 of their size, which float32 cannot resolve (shares off by up to
1e-2, some negative); a pass in float64 computes the same function of the same weights (every float32 is exactly a
float64) without that rounding. A float64 copy of the whole model takes twice its float32 size (12.8 GB for NLLB-200
1.3B's shape, refused on a 24 GB machine); here each layer is converted just before it runs, read by every method
while its modules are at hand (value zeroing runs the layer's own modules on variants of its input), and freed before
the next. The extra memory is one layer in float64 (~200 MB for NLLB-200 1.3B's), the sentence's embedding rows, the
positions and the final norms; the numbers are a whole copy's: the same modules on the same float64 inputs (a row
looked up and then converted is the converted table's row). The output layer is never run: no method reads logits.

The model's lock is held while each part's weights are read, not for the whole pass, so other sessions translate
between its layers; each pass converts its own layers (a few ms each for the shipped model), so nothing is kept.
"""
from __future__ import annotations

from contextlib import contextmanager
from functools import partial
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnscope.engine.attribution.contributions import Contributions, Mixing, rolled_out
from attnscope.engine.recording.sharing import model_lock
from attnscope.engine.recording.trace import Layer, kept
from attnscope.engine.recording.tracer import trace_layer
from attnscope.model.budget import model_refusal
from attnscope.model.layers import EncoderLayer
from attnscope.model.transformer import Transformer

_NOT_OUTER = ("encoder.", "decoder.", "src_embed.", "tgt_embed.", "generator.")  # converted per layer, read by row,
# or never run


def largest_layer(model: Transformer) -> int:
    """Numbers held by the model's largest layer: what the pass holds in float64 at once, beside small parts."""
    return max(sum(p.numel() for p in layer.parameters()) for layer in (*model.encoder, *model.decoder))


def float64_refusal(model: Transformer) -> str | None:
    """One sentence when one layer's float64 copy (the largest) would not fit in the memory available now."""
    return model_refusal(largest_layer(model), "the float64 copy of one layer that value zeroing and ALTI+ need", 8)


def _float64(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Each tensor on the CPU in float64 (integers as they are), converted once (a tied one once for all its names)."""
    converted: dict[int, Tensor] = {}
    for t in state.values():
        if id(t) not in converted:
            converted[id(t)] = t.detach().to("cpu", torch.float64 if t.is_floating_point() else t.dtype)
    return {name: converted[id(t)] for name, t in state.items()}


class _Rows(nn.Module):
    """An embedding table read in float64 row by row: the rows a sentence uses, looked up in the model's own table and
    then converted (the converted table's rows, without converting a table of 2 GB in float64 for NLLB's)."""

    def __init__(self, table: nn.Embedding) -> None:
        super().__init__()
        self.table = table.weight.detach()  # a plain tensor: no parameter of the shell

    def forward(self, ids: Tensor) -> Tensor:
        return F.embedding(ids.to(self.table.device), self.table).to("cpu", torch.float64)


def _shell(model: Transformer) -> Transformer:
    """The model's structure in float64 on the CPU with only its small outer parts filled (positions, embedding
    norms, final norms); its layers and output layer unallocated (meta) and its embeddings read by row (_Rows). Built
    from the config, so no listener on the shared model's hook points (such as a head gate) comes along."""
    with torch.random.fork_rng(devices=[]), torch.device("meta"):  # nothing allocated until each tensor is assigned
        shell = Transformer(model.config, initialise=False)
    with model_lock(model):
        outer = _float64({k: t for k, t in model.state_dict().items() if not k.startswith(_NOT_OUTER)})
    shell.load_state_dict(outer, strict=False, assign=True)
    shell = shell.to(dtype=torch.float64).eval()  # and the buffers the state dict leaves out (position tables)
    shell.src_embed, shell.tgt_embed = _Rows(model.src_embed), _Rows(model.tgt_embed)
    return shell


@contextmanager
def _filled(skeleton: nn.Module, layer: nn.Module, model: Transformer) -> Iterator[nn.Module]:
    """`skeleton` (a layer of the shell) holding `layer`'s weights in float64 for the block, unallocated again after."""
    with model_lock(model):
        state = _float64(layer.state_dict())
    skeleton.load_state_dict(state, assign=True)
    del state
    try:
        yield skeleton
    finally:
        skeleton.to_empty(device="meta")  # the float64 weights go, whoever still holds the traced layer


def contributions(model: Transformer, source_ids: Sequence[int], decoder_ids: Sequence[int],
                  mixings: Sequence[Mixing]) -> tuple[Contributions, ...]:
    """Each method's contributions (`mixings`, in order) of one teacher-forced pass (source, <bos> y1 .. y_t) in
    float64, one layer at a time; a MemoryError with one sentence when one layer's copy would not fit."""
    refused = float64_refusal(model)
    if refused:
        raise MemoryError(refused)
    shell = _shell(model)
    src, tgt = torch.tensor([list(source_ids)]), torch.tensor([list(decoder_ids)])
    encoder: list[list[np.ndarray]] = [[] for _ in mixings]
    decoder: list[list[np.ndarray]] = [[] for _ in mixings]
    with torch.no_grad():
        with model_lock(model):  # the embedding rows are read from the model's tables
            x, y = shell.embed(src), shell.embed(tgt, decoder=True)
        source_mask, bias = shell.source_mask(src), None
        for i, (skeleton, layer) in enumerate(zip(shell.encoder, model.encoder)):
            with _filled(skeleton, layer, model) as exact:
                bias = _stack_bias(exact, src.shape[1]) if i == 0 else bias
                x = _read(trace_layer(exact, i, partial(exact, x, source_mask, False, bias)), mixings, encoder)
        memory, target_mask, bias = shell.encoder_norm(x), shell.target_mask(tgt), None
        for i, (skeleton, layer) in enumerate(zip(shell.decoder, model.decoder)):
            with _filled(skeleton, layer, model) as exact:
                bias = _stack_bias(exact, tgt.shape[1]) if i == 0 else bias
                run = partial(exact, y, memory, target_mask, source_mask, None, False, bias)
                y = _read(trace_layer(exact, i, run), mixings, decoder)
    return tuple(rolled_out(m.method, enc, dec) for m, enc, dec in zip(mixings, encoder, decoder))


def _stack_bias(first: nn.Module, n: int) -> Tensor | None:
    """The relative position bias (1, H, n, n) every layer of a stack adds, from its first layer's table (T5); None
    without one."""
    return None if first.relative_bias is None else first.relative_bias(n, n)


def _read(lt: Layer, mixings: Sequence[Mixing], into: list[list[np.ndarray]]) -> Tensor:
    """Every method's mixing of one traced layer appended to its list; the layer's output (the next one's input)."""
    for m, layers in zip(mixings, into):
        layers.append(m.encoder(lt) if isinstance(lt.module, EncoderLayer) else m.decoder(lt))
    return kept(lt.output)
