"""A few training steps on copying (source words back, then <eos>) so that a tiny model decodes like a trained
one: sentences end with <eos> at different steps, and a beam search has real choices to make."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

UNK, PAD, SOS, EOS = 0, 1, 2, 3  # torchtext's order (<unk> <pad> <sos> <eos>), which all three repositories used


def copy_batch(gen: torch.Generator, n_vocab: int, size: int = 16) -> Tensor:
    """[B, S] padded <sos> w1 .. wn <eos> with 2..6 random words."""
    rows = [torch.cat([torch.tensor([SOS]), torch.randint(4, n_vocab, (int(n),), generator=gen), torch.tensor([EOS])])
            for n in torch.randint(2, 7, (size,), generator=gen)]
    return nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=PAD)


def train_copy(model: nn.Module, logits: Callable[[Tensor, Tensor], Tensor], n_vocab: int, steps: int,
               seed: int = 0, lr: float = 3e-3) -> nn.Module:
    """Train `model` in place (logits(src, decoder_input) -> [B, T, V]); returns it in eval mode."""
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    for _ in range(steps):
        seq = copy_batch(gen, n_vocab)
        out = logits(seq, seq[:, :-1])
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), seq[:, 1:].reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()
