"""Whether fp16 storage keeps an imported model's outputs: its greedy translations of a few sentences, and how
far its logits move, with the weights rounded to fp16 as `checkpoint.save(half=True)` stores them."""
from __future__ import annotations

import copy
from typing import Sequence

import torch

from attnscope.checkpoints.checkpoint import Bundle, unique_state
from attnscope.model.transformer import Transformer

SENTENCES = ("A man rides a bike down the street.", "Two dogs are playing in the snow.", "The children sing a song.",
             "It is five o'clock, isn't it?", "A woman reads a book in the park near the river.")


@torch.no_grad()
def greedy_ids(model: Transformer, source: list[int], steps: int) -> list[int]:
    """Greedy output ids by full forward passes (no cache: independent of the engine's decoding)."""
    out: list[int] = []
    src = torch.tensor([source])
    for _ in range(steps):
        logits = model(src, torch.tensor([[model.config.bos_id, *out]]))[0, -1]
        out.append(int(logits.argmax()))
        if out[-1] == model.config.eos_id:
            break
    return out


@torch.no_grad()
def half_report(model: Transformer, bundle: Bundle, sentences: Sequence[str] = SENTENCES, steps: int = 24, *,
                in_place: bool = False) -> str:
    """One sentence: does fp16 storage keep the greedy outputs, and the largest logit change it makes. `in_place`
    rounds `model`'s own weights (a caller done with the float32 ones: the CLI after saving) instead of a copy's,
    so a big model is never held twice."""
    sources = [model.config.frame_source(bundle.src_codec.encode(text))[: model.config.max_len] for text in sentences]
    ours = [greedy_ids(model, source, steps) for source in sources]
    inputs = [(torch.tensor([source]), torch.tensor([[model.config.bos_id, *out[:-1]]]))
              for source, out in zip(sources, ours)]
    before = [model(src, tgt) for src, tgt in inputs]
    rounded = model if in_place else copy.deepcopy(model)
    for tensor in unique_state(rounded).values():
        if tensor.is_floating_point():
            tensor.copy_(tensor.half().float())
    kept, moved = 0, 0.0
    for source, out, (src, tgt), a in zip(sources, ours, inputs, before):
        kept += greedy_ids(rounded, source, steps) == out
        b = rounded(src, tgt)
        finite = torch.isfinite(a)
        moved = max(moved, float((a[finite] - b[finite]).abs().nan_to_num(nan=float("inf")).max()))  # NaN: overflowed
    verdict = "keeps" if kept == len(sentences) else "changes"
    return (f"fp16 storage {verdict} the greedy outputs ({kept} of {len(sentences)} sample sentences identical; "
            f"largest logit change {moved:.1e})")
