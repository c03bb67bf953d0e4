"""A loaded model with its tokenizers: text in, translation out."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from attnscope.checkpoint import Bundle
from attnscope.data import Example, make_example, pad
from attnscope.decode import greedy_batch
from attnscope.model import Transformer


@dataclass
class Translator:
    """Public entry point for translating with a checkpoint (see `attnscope.load`)."""

    model: Transformer
    bundle: Bundle
    device: torch.device = torch.device("cpu")

    def encode_source(self, text: str) -> Example:
        """Source ids with <eos>, truncated to what the model can read."""
        return make_example(self.bundle.src_codec.encode(text), [], self.model.config.max_len)

    @torch.no_grad()
    def translate_batch(self, texts: Sequence[str], beam_size: int = 1, max_len: int | None = None,
                        batch_size: int = 64) -> list[str]:
        """Translate many sentences, batching sources of similar length together."""
        if beam_size != 1:
            from attnscope.beam import beam_search_batch
        was_training = self.model.training
        self.model.eval()
        sources = [self.encode_source(t).src for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(sources[i]))
        out: list[str] = [""] * len(texts)
        try:
            for start in range(0, len(order), batch_size):
                idx = order[start:start + batch_size]
                src = pad([sources[i] for i in idx]).to(self.device)
                if beam_size == 1:
                    ids = greedy_batch(self.model, src, max_len)
                else:
                    ids = beam_search_batch(self.model, src, beam_size, max_len)
                for i, row in zip(idx, ids):
                    out[i] = self.bundle.tgt_codec.decode(row)
        finally:
            self.model.train(was_training)
        return out
