"""Greedy decoding, forced decoding and teacher forcing, step by step, with the KV cache.

Each step's attention rows come from the same forward pass that chose the token, so what
a view shows for step t is exactly what the model computed at step t.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch
from torch import Tensor

from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules
from attnscope.engine.decoding.rules import constrain, history, limit
from attnscope.engine.recording.sharing import eval_mode
from attnscope.engine.recording.steps import join_steps
from attnscope.engine.recording.trace import decoder_inputs
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


def entropy(probs: Tensor, log_probs: Tensor) -> Tensor:
    """The entropy of each distribution over the last dimension; 0 x -inf (a banned token) counts 0."""
    return -(probs * log_probs).nansum(-1)


def _step_stats(logits: Tensor, top_k: int) -> tuple[Tensor, list[int], list[float], float]:
    log_probs = logits.float().log_softmax(-1)  # (V,)
    probs = log_probs.exp()
    top = probs.topk(min(top_k, probs.shape[-1]))
    return log_probs, top.indices.tolist(), top.values.tolist(), float(entropy(probs, log_probs))


@dataclass
class GreedyRun:
    """A greedy decode as far as it has gone: its steps and, when captured, every head's rows so far."""

    out: Decoded = field(default_factory=lambda: Decoded([]))
    encoder: Tensor | None = None  # (L, H, S, S)
    selves: list[Tensor] = field(default_factory=list)  # each step's (L, H, 1, K_t)
    crosses: list[Tensor] = field(default_factory=list)  # each step's (L, H, 1, S)
    finished: bool = False  # the decode reached <eos> or its length limit

    def decoded(self) -> Decoded:
        """What `greedy` returns had the decode ended here: the steps so far with their rows joined."""
        out = Decoded(list(self.out.ids), list(self.out.steps))
        if self.encoder is not None and self.selves:
            out.encoder = self.encoder
            out.decoder, out.cross = join_steps(self.selves, last_query=True), join_steps(self.crosses, last_query=True)
        return out


@torch.inference_mode()  # not only no_grad: views and small ops skip autograd's bookkeeping (8 attention calls a step)
def greedy_steps(model: Transformer, src_ids: Sequence[int], *, max_len: int | None = None, use_cache: bool = True,
                 capture: bool = True, prefix: Sequence[int] = (), top_k: int = 10,
                 rules: DecodingRules = ATTNSCOPE) -> Iterator[GreedyRun]:
    """`greedy`, one step at a time: yields its run once the source is encoded, then after every step (the same
    object, grown by that step). Closing the generator stops the decode; the run keeps what was decoded."""
    max_len = max_len or limit(rules, model, len(src_ids))
    src = torch.tensor([list(src_ids)], dtype=torch.long, device=_device(model))
    with eval_mode(model):
        source = model.encode(src, output_attentions=capture)
        run = GreedyRun(encoder=torch.cat(source.attentions) if capture else None)
        yield run
        cache = DecoderCache.empty(len(model.decoder)) if use_cache else None
        out, inputs = run.out, [model.config.bos_id]
        while len(out.ids) < max_len and (not out.ids or out.ids[-1] != model.config.eos_id):
            feed = torch.tensor([inputs[-1:] if use_cache else inputs], device=src.device)
            step = model.decode(feed, source, cache, last_only=True, output_attentions=capture)
            t = len(out.ids)
            logits = constrain(step.logits[:, -1], rules, t, max_len, history(model, rules, [inputs]), model.config.eos_id)
            log_probs, top_ids, top_probs, entropy = _step_stats(logits[0], top_k)
            forced = t < len(prefix)
            token = int(prefix[t]) if forced else top_ids[0]
            if capture:  # this step's rows of every layer, (L, H, Q, K_t)
                run.selves.append(torch.cat(step.self_attentions))
                run.crosses.append(torch.cat(step.cross_attentions))
            out.steps.append(RawStep(token, float(log_probs[token]), top_ids, top_probs, entropy, forced))
            out.ids.append(token)
            inputs.append(token)
            run.finished = len(out.ids) >= max_len or token == model.config.eos_id
            yield run


def greedy(model: Transformer, src_ids: Sequence[int], *, max_len: int | None = None, use_cache: bool = True,
           capture: bool = True, prefix: Sequence[int] = (), top_k: int = 10, rules: DecodingRules = ATTNSCOPE) -> Decoded:
    """Decode one source greedily under `rules` (its length limit and each step's bans, rules.py); the first
    len(prefix) tokens are forced (the "what if" branch). A step's probabilities are those of the tokens the rules
    leave (banned logits are -inf before the softmax; greedy's choice is the same either way). With `capture`,
    every head's weights come back from the very passes that chose the tokens."""
    *_, run = greedy_steps(model, src_ids, max_len=max_len, use_cache=use_cache, capture=capture, prefix=prefix,
                           top_k=top_k, rules=rules)  # every yield is the one run, grown
    return run.decoded()


@torch.no_grad()
def teacher_force(model: Transformer, src_ids: Sequence[int], tgt_ids: Sequence[int], *, top_k: int = 10) -> Decoded:
    """Score a given target (ids, usually ending in <eos>) in one full forward pass."""
    src = torch.tensor([list(src_ids)], dtype=torch.long, device=_device(model))
    tgt_in = torch.tensor([decoder_inputs(tgt_ids, model.config.bos_id)], dtype=torch.long, device=src.device)
    with eval_mode(model):
        source = model.encode(src, output_attentions=True)
        target = model.decode(tgt_in, source, output_attentions=True)
    out = Decoded(list(tgt_ids), encoder=torch.cat(source.attentions), decoder=torch.cat(target.self_attentions),
                  cross=torch.cat(target.cross_attentions))
    for t, token in enumerate(tgt_ids):
        log_probs, top_ids, top_probs, entropy = _step_stats(target.logits[0, t], top_k)
        out.steps.append(RawStep(int(token), float(log_probs[token]), top_ids, top_probs, entropy, True))
    return out


@torch.no_grad()
def greedy_batch(model: Transformer, src: Tensor, max_len: int | None = None, use_cache: bool = True,
                 rules: DecodingRules = ATTNSCOPE) -> list[list[int]]:
    """Greedy decoding of padded sources (B, S) under `rules`; returns each target's ids without specials."""
    max_len = max_len or limit(rules, model, src.shape[1])
    with eval_mode(model):
        source = model.encode(src)
        cache = DecoderCache.empty(len(model.decoder)) if use_cache else None
        b = src.shape[0]
        c = model.config
        out = torch.full((b, 1), c.bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(b, dtype=torch.bool, device=src.device)
        while out.shape[1] < max_len + 1 and not bool(done.all()):
            feed = out[:, -1:] if use_cache else out
            logits = model.next_logits(feed, source, cache)  # (B, V)
            logits = constrain(logits, rules, out.shape[1] - 1, max_len, history(model, rules, out), c.eos_id)
            token = logits.argmax(-1).masked_fill(done, c.pad_id)
            out = torch.cat([out, token.unsqueeze(1)], dim=1)
            done |= token == c.eos_id
    return [strip_specials(row, c.eos_id, (c.bos_id, c.pad_id)) for row in out[:, 1:].tolist()]


def _device(model: Transformer) -> torch.device:
    return next(model.parameters()).device
