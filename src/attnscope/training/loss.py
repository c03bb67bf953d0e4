"""The training objective: label-smoothed cross-entropy (section 5.4, epsilon_ls), computed in row chunks so the
vocabulary-wide softmax never exists for the whole batch at once, and the validation loss."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from attnscope.model.transformer import Transformer
from attnscope.training.data import Example, collate, token_batches

LOSS_CHUNK_ROWS = 32


class SmoothedCrossEntropy(torch.autograd.Function):
    """F.cross_entropy(logits.float(), target, ignore_index=pad_id, label_smoothing=s, reduction="sum") for
    logits (N, V), computed a few rows at a time with its gradient, (softmax - smoothed one-hot) on non-pad rows,
    in the same pass: autograd's version makes about ten passes over (N, V) fp32 tensors, each freshly allocated
    (page faults), which cost a fifth of a CPU training step."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, target: torch.Tensor, smoothing: float, pad_id: int) -> torch.Tensor:
        n, v = logits.shape
        keep = (target != pad_id)[:, None]  # (N, 1)
        grad = torch.empty_like(logits) if ctx.needs_input_grad[0] else None
        sums = []
        for start in range(0, n, LOSS_CHUNK_ROWS):
            rows = slice(start, start + LOSS_CHUNK_ROWS)
            log_probs = logits[rows].float().log_softmax(-1)
            t = target[rows, None]
            loss = log_probs.gather(1, t).mul_(smoothing - 1.0) - log_probs.sum(-1, keepdim=True).mul_(smoothing / v)
            sums.append(loss.masked_fill_(~keep[rows], 0.0).sum())
            if grad is not None:
                probs = log_probs.exp_().sub_(smoothing / v)
                probs.scatter_add_(1, t, probs.new_full(t.shape, smoothing - 1.0))
                torch.mul(probs, keep[rows], out=grad[rows])
        ctx.grad = grad
        return torch.stack(sums).sum() if sums else logits.new_zeros((), dtype=torch.float32)

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        """Scales the stored (N, V) gradient in place, sparing an allocation as big as the logits; so it runs once."""
        grad, ctx.grad = ctx.grad, None
        if grad is None:
            raise RuntimeError("SmoothedCrossEntropy's backward can run only once per forward")
        return grad.mul_(grad_loss), None, None, None


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float,
                        pad_id: int) -> tuple[torch.Tensor, int]:
    """Summed smoothed cross-entropy over targets other than `pad_id` (the model config's), and their count. On the CPU through
    SmoothedCrossEntropy; on a GPU through F.cross_entropy, whose fused kernels have no such cost and
    which a row-chunked Python loop would only slow down with kernel launches."""
    flat_logits, flat_target = logits.reshape(-1, logits.shape[-1]), target.reshape(-1)
    if logits.device.type == "cpu":
        loss = SmoothedCrossEntropy.apply(flat_logits, flat_target, smoothing, pad_id)
    else:
        loss = F.cross_entropy(flat_logits.float(), flat_target, ignore_index=pad_id, label_smoothing=smoothing,
                               reduction="sum")
    return loss, int((target != pad_id).sum())


@torch.no_grad()
def validation_loss(model: Transformer, examples: list[Example], device: torch.device) -> float:
    model.eval()
    total, count = 0.0, 0
    for idx in token_batches(examples, 8000, shuffle=False):
        batch = collate([examples[i] for i in idx], model.config.pad_id).to(device)
        loss, n = label_smoothed_loss(model(batch.src, batch.tgt_in), batch.tgt_out, 0.0, batch.pad_id)
        total, count = total + float(loss), count + n
    model.train()
    return total / max(count, 1)
