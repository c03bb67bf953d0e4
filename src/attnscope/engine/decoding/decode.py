"""Greedy decoding, forced decoding and teacher forcing, step by step, with the KV cache.

Each step's attention rows come from the same forward pass that chose the token, so what
a view shows for step t is exactly what the model computed at step t.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import Tensor

from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules
from attnscope.engine.decoding.rules import constrain, history, limit
from attnscope.engine.recording.capture import record_attention
from attnscope.engine.recording.tracer import decoder_inputs, model_lock
from attnscope.model.config import BOS_ID, EOS_ID, PAD_ID
from attnscope.model.tokenization import strip_specials
from attnscope.model.transformer import DecoderCache, Transformer


@dataclass
class RawStep:
    """One decoding step in ids and tensors (the Translator turns it into a DecodeStep)."""

    token_id: int
    log_prob: float
    top_ids: list[int]
    top_probs: list[float]
    entropy: float
    forced: bool = False


@dataclass
class Decoded:
    """A decoded (or teacher-forced) target with its steps and, if captured, all attention."""

    ids: list[int]  # generated ids, ending with <eos> when the model produced it
    steps: list[RawStep] = field(default_factory=list)
    encoder: Tensor | None = None  # (L, H, S, S)
    decoder: Tensor | None = None  # (L, H, T, T), T = len(ids): inputs <bos> y1 .. y_{T-1}
    cross: Tensor | None = None  # (L, H, T, S)

    @property
    def log_prob(self) -> float:
        return sum(s.log_prob for s in self.steps)


def default_max_len(model: Transformer, src_len: int) -> int:
    """attnscope's own target budget: generous for translation (2 x source + 10), never past the positional table."""
    return limit(ATTNSCOPE, model, src_len)


def _step_stats(logits: Tensor, top_k: int) -> tuple[Tensor, list[int], list[float], float]:
    log_probs = logits.float().log_softmax(-1)  # (V,)
    probs = log_probs.exp()
    top = probs.topk(min(top_k, probs.shape[-1]))
    entropy = float(-(probs * log_probs).nan_to_num().sum())
    return log_probs, top.indices.tolist(), top.values.tolist(), entropy


def step_rows(calls_per_layer: Sequence[Sequence[Tensor]]) -> Tensor:
    """(L, H, T, K) from the calls of each layer's module, one call per decoding step, each (1, H, Q, K_t):
    row t is the last query of step t's call, the very tensor that step's forward pass computed; keys a
    step did not have yet (the future, in masked self-attention) are 0.

    Assembled once per sentence, after decoding: with a KV cache each call is one row, so a layer's rows
    are one concatenation, written into the lower triangle (or the full width) by one boolean index."""
    n_steps = len(calls_per_layer[0])
    lengths = torch.tensor([c.shape[-1] for c in calls_per_layer[0]])
    rows = [c if c.shape[2] == 1 else c[:, :, -1:] for calls in calls_per_layer for c in calls]
    flat = torch.cat(rows, dim=-1)[0, :, 0]  # (H, L * sum K_t): layer 0's rows, then layer 1's...
    n_layers, n_heads = len(calls_per_layer), flat.shape[0]
    filled = torch.arange(int(lengths.max())) < lengths[:, None]  # (T, K): row t has keys 0..K_t-1
    out = flat.new_zeros(n_layers, n_heads, n_steps, filled.shape[1])
    out[:, :, filled.to(flat.device)] = flat.view(n_heads, n_layers, -1).transpose(0, 1)
    return out


@torch.inference_mode()  # not only no_grad: views and small ops skip autograd's bookkeeping (8 attention calls a step)
def greedy(model: Transformer, src_ids: Sequence[int], *, max_len: int | None = None, use_cache: bool = True,
           capture: bool = True, prefix: Sequence[int] = (), top_k: int = 10, rules: DecodingRules = ATTNSCOPE) -> Decoded:
    """Decode one source greedily under `rules` (its length limit and each step's bans, rules.py); the first
    len(prefix) tokens are forced (the "what if" branch). A step's probabilities are those of the tokens the rules
    leave (banned logits are -inf before the softmax; greedy's choice is the same either way)."""
    max_len = max_len or limit(rules, model, len(src_ids))
    src = torch.tensor([list(src_ids)], dtype=torch.long, device=_device(model))
    recorder = record_attention(model) if capture else contextlib.nullcontext()
    with model_lock(model), recorder as rec:
        memory, src_mask = model.encode(src)
        out = Decoded([])
        if capture:  # the encoder's modules, called once each
            out.encoder = torch.stack([rec.calls[n][0][0] for n in rec.by_kind()["encoder"]])
            rec.clear()
        cache = DecoderCache.empty(len(model.decoder)) if use_cache else None
        inputs = [BOS_ID]
        while len(out.ids) < max_len and (not out.ids or out.ids[-1] != EOS_ID):
            feed = inputs[-1:] if use_cache else inputs
            logits = model.next_logits(torch.tensor([feed], device=src.device), memory, src_mask, cache)[0]
            t = len(out.ids)
            logits = constrain(logits[None], rules, t, max_len, history(model, rules, [inputs]))[0]
            log_probs, top_ids, top_probs, entropy = _step_stats(logits, top_k)
            forced = t < len(prefix)
            token = int(prefix[t]) if forced else top_ids[0]
            step = RawStep(token, float(log_probs[token]), top_ids, top_probs, entropy, forced)
            out.steps.append(step)
            out.ids.append(token)
            inputs.append(token)
    if capture:  # each decoder module was called once per step, in order
        names = rec.by_kind()
        out.decoder = step_rows([rec.calls[n] for n in names["decoder"]])
        out.cross = step_rows([rec.calls[n] for n in names["cross"]])
    return out


@torch.no_grad()
def teacher_force(model: Transformer, src_ids: Sequence[int], tgt_ids: Sequence[int], *, top_k: int = 10) -> Decoded:
    """Score a given target (ids, usually ending in <eos>) in one full forward pass."""
    src = torch.tensor([list(src_ids)], dtype=torch.long, device=_device(model))
    tgt_in = torch.tensor([decoder_inputs(tgt_ids)], dtype=torch.long, device=src.device)
    names = model.attention_by_kind()
    with record_attention(model) as rec:
        logits = model(src, tgt_in)[0]  # (T, V)
    weights = rec.weights

    def stack(kind: str) -> torch.Tensor:
        return torch.stack([weights[n][0] for n in names[kind]])

    out = Decoded(list(tgt_ids), encoder=stack("encoder"), decoder=stack("decoder"), cross=stack("cross"))
    for t, token in enumerate(tgt_ids):
        log_probs, top_ids, top_probs, entropy = _step_stats(logits[t], top_k)
        out.steps.append(RawStep(int(token), float(log_probs[token]), top_ids, top_probs, entropy, True))
    return out


@torch.no_grad()
def greedy_batch(model: Transformer, src: Tensor, max_len: int | None = None, use_cache: bool = True,
                 rules: DecodingRules = ATTNSCOPE) -> list[list[int]]:
    """Greedy decoding of padded sources (B, S) under `rules`; returns each target's ids without specials."""
    max_len = max_len or limit(rules, model, src.shape[1])
    with model_lock(model):
        memory, src_mask = model.encode(src)
        cache = DecoderCache.empty(len(model.decoder)) if use_cache else None
        b = src.shape[0]
        out = torch.full((b, 1), BOS_ID, dtype=torch.long, device=src.device)
        done = torch.zeros(b, dtype=torch.bool, device=src.device)
        while out.shape[1] < max_len + 1 and not bool(done.all()):
            feed = out[:, -1:] if use_cache else out
            logits = model.next_logits(feed, memory, src_mask, cache)  # (B, V)
            logits = constrain(logits, rules, out.shape[1] - 1, max_len, history(model, rules, out))
            token = logits.argmax(-1).masked_fill(done, PAD_ID)
            out = torch.cat([out, token.unsqueeze(1)], dim=1)
            done |= token == EOS_ID
    return [strip_specials(row) for row in out[:, 1:].tolist()]


def _device(model: Transformer) -> torch.device:
    return next(model.parameters()).device
