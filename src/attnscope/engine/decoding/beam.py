"""Beam search over a batch of sources, with the KV cache and, for one source, its search tree (and, on request,
every head's attention for the best hypothesis, recorded while it searches)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

import torch
from torch import Tensor

from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules
from attnscope.engine.decoding.beam_result import BeamNode, BeamResult
from attnscope.engine.decoding.decode import Decoded, RawStep
from attnscope.engine.decoding.rules import constrain, done, history, keep, limit, triage
from attnscope.engine.recording.sharing import eval_mode
from attnscope.engine.recording.steps import join_steps
from attnscope.model.tokenization import strip_specials
from attnscope.model.transformer import DecoderCache, DecoderOutput, EncoderOutput, Transformer


class Watcher(Protocol):
    """What a caller sees of a beam search while it runs (beam_decode records the best hypothesis from it)."""

    def encoded(self, source: EncoderOutput) -> None:
        """The encoder's output, with every layer's weights."""

    def stepped(self, log_probs: Tensor, top_idx: Tensor, step: DecoderOutput) -> None:
        """One step: next-token log-probabilities (B*k, V), the flat indices (B, 2k) of the candidates it ranked,
        and the decoder's output with every head's weights, before the beam moves on."""


def normalised(log_prob: float, length: int, alpha: float) -> float:
    """attnscope's own score of a finished hypothesis: log-prob / length^alpha."""
    return log_prob / ATTNSCOPE.with_penalty(alpha).divisor(length)


@torch.no_grad()
def beam_search(model: Transformer, src: Tensor, beam_size: int, *, max_len: int | None = None,
                length_penalty: float | None = None, use_cache: bool = True, watch: Watcher | None = None,
                rules: DecodingRules = ATTNSCOPE) -> list[BeamResult]:
    """Beam search for padded sources (B, S) under `rules` (rules.py: each step's bans, the scores of finished
    hypotheses, log-prob / penalty(length), with alpha `length_penalty` if given, and when a search ends). A
    `watch`er sees the search as it runs, every head's weights included."""
    b, k = src.shape[0], beam_size
    rules = rules.with_penalty(length_penalty)
    max_len = max_len or limit(rules, model, src.shape[1])
    with eval_mode(model):
        source = model.encode(src, output_attentions=watch is not None)
        if watch is not None:
            watch.encoded(source)
        source = source.repeat(k)  # (B*k, S, D)
        cache = DecoderCache.empty(len(model.decoder)) if use_cache else None
        bos, eos = model.config.bos_id, model.config.eos_id
        tokens = torch.full((b * k, 1), bos, dtype=torch.long, device=src.device)
        scores = torch.full((b, k), float("-inf"), device=src.device)
        scores[:, 0] = 0.0  # at first only one live hypothesis per source
        results = [BeamResult([], [BeamNode(0, None, 0, bos, 0.0, "extended")]) for _ in range(b)]
        node_of = [[0] * k for _ in range(b)]  # beam slot -> tree node
        finished = [False] * b
        for step in range(1, max_len + 1):
            feed = tokens[:, -1:] if use_cache else tokens
            step_out = model.decode(feed, source, cache, last_only=True, output_attentions=watch is not None)
            log_probs = step_out.logits[:, -1].float().log_softmax(-1)  # (B*k, V)
            log_probs = constrain(log_probs, rules, step - 1, max_len, history(model, rules, tokens), eos)
            cand = (scores.view(-1, 1) + log_probs).view(b, -1)  # (B, k*V)
            top_scores, top_idx = cand.topk(2 * k, dim=1)
            if watch is not None:
                watch.stepped(log_probs, top_idx, step_out)
            parents, next_tokens, next_scores = [], [], []
            for i in range(b):
                chosen, over = ([(0, eos, float("-inf"))] * k, True) if finished[i] else _advance(  # finished: dead
                    results[i], node_of[i], top_scores[i].tolist(), top_idx[i].tolist(), log_probs.shape[-1],
                    k, step, rules, max_len, eos)
                for parent, token, score in chosen:
                    parents.append(i * k + parent)
                    next_tokens.append(token)
                    next_scores.append(score)
                finished[i] = over
            if all(finished):
                break
            order = torch.tensor(parents, device=src.device)
            tokens = torch.cat([tokens[order], torch.tensor(next_tokens, device=src.device).unsqueeze(1)], 1)
            scores = torch.tensor(next_scores, device=src.device).view(b, k)
            if cache is not None:
                cache.reorder(order)
    for r in results:
        r.hypotheses.sort(key=lambda h: -h[1])
        _mark_pruned(r)
    return results


def _advance(result: BeamResult, node_of: list[int], top_scores: list[float], top_idx: list[int], vocab: int,
             k: int, step: int, rules: DecodingRules, budget: int, eos: int) -> tuple[list[tuple[int, int, float]], bool]:
    """Sort the 2k best candidates of one source into finished hypotheses and the next beam of k (rules.triage), and
    say whether the source's search is over (rules.done)."""
    n = next((r for r, s in enumerate(top_scores) if s == float("-inf")), len(top_scores))
    tokens = [idx % vocab for idx in top_idx[:n]]
    ends, carry = (set(ranks) for ranks in triage(rules, tokens, k, step == budget, eos))
    chosen: list[tuple[int, int, float]] = []
    new_nodes: list[int] = []
    for rank in range(n):
        score, (parent, token) = top_scores[rank], divmod(top_idx[rank], vocab)
        if rank in ends:
            found = [h[1] for h in result.hypotheses]
            at = keep(rules, found, score / rules.divisor(step), k)
            if at is not None:
                node = _add_node(result, node_of[parent], step, token, score, "finished", rules, parent)
                entry = (result.path(node.id), node.score, score)
                result.hypotheses[at:at + 1] = [entry]
        elif rank in carry:
            chosen.append((parent, token, score))
            new_nodes.append(_add_node(result, node_of[parent], step, token, score, "alive", rules, parent).id)
    over = done(rules, [h[1] for h in result.hypotheses], k, chosen[0][2] if chosen else None, step, budget,
                0 in ends) or step == budget
    while len(chosen) < k:
        chosen.append((0, eos, float("-inf")))  # a dead row fills the beam
        new_nodes.append(0)
    node_of[:] = new_nodes
    return chosen, over


def _add_node(result: BeamResult, parent: int, step: int, token: int, score: float, status: str,
              rules: DecodingRules, slot: int) -> BeamNode:
    node = BeamNode(len(result.nodes), parent, step, token, score, status,
                    score / rules.divisor(step) if status == "finished" else None, slot)
    result.nodes.append(node)
    return node


def _mark_pruned(result: BeamResult) -> None:
    """Live nodes that no later node extends were pruned from the beam."""
    has_child = {n.parent for n in result.nodes if n.parent is not None}
    for node in result.nodes:
        if node.status == "alive":
            node.status = "extended" if node.id in has_child else "pruned"


def beam_search_batch(model: Transformer, src: Tensor, beam_size: int, max_len: int | None = None,
                      rules: DecodingRules = ATTNSCOPE) -> list[list[int]]:
    """Best hypothesis per source, as ids without specials (for translate_batch and BLEU)."""
    c = model.config
    return [strip_specials(r.hypotheses[0][0], c.eos_id, (c.bos_id, c.pad_id)) if r.hypotheses else []
            for r in beam_search(model, src, beam_size, max_len=max_len, rules=rules)]


@dataclass
class _StepStats:
    """What one step of a one-source search offers each beam row: its top-k, entropy and the ranked candidates'
    log-probabilities (the chosen token is always among them), and every row's weights."""

    top_probs: Tensor  # (k, top_k)
    top_ids: Tensor  # (k, top_k)
    entropy: Tensor  # (k,)
    candidates: dict[int, float]  # flat index row * V + token -> that token's log-probability in that row
    attention: dict[str, Tensor]  # "decoder" / "cross" -> (L, k, H, Q, K_t)


@dataclass
class _Recorder:
    """The Watcher of a one-source search: the encoder's weights and each step's statistics."""

    top_k: int
    encoder: Tensor | None = None  # (L, H, S, S)
    steps: list[_StepStats] = field(default_factory=list)

    def encoded(self, source: EncoderOutput) -> None:
        self.encoder = torch.cat(source.attentions)

    def stepped(self, log_probs: Tensor, top_idx: Tensor, step: DecoderOutput) -> None:
        probs = log_probs.exp()
        top = probs.topk(min(self.top_k, probs.shape[-1]), dim=-1)
        flat = top_idx[0]
        lps = log_probs.view(-1)[flat]
        self.steps.append(_StepStats(top.values, top.indices, -(probs * log_probs).nan_to_num().sum(-1),
                                     dict(zip(flat.tolist(), lps.tolist())),
                                     {"decoder": torch.stack(step.self_attentions),
                                      "cross": torch.stack(step.cross_attentions)}))


@torch.inference_mode()
def beam_decode(model: Transformer, src_ids: Sequence[int], beam_size: int, *, max_len: int | None = None,
                length_penalty: float | None = None, use_cache: bool = True, top_k: int = 10,
                rules: DecodingRules = ATTNSCOPE) -> tuple[BeamResult, Decoded]:
    """Beam search for one source, recording every head while it searches, and the best hypothesis as `greedy`
    gives a sentence: its steps (top-k, entropy) and attention, read from the rows of the beam that computed each
    of its tokens (the nodes' slots; the KV cache was reordered with the beam, so each row attends over that
    hypothesis' own prefix). No second pass: the record is what the search computed."""
    src = torch.tensor([list(src_ids)], dtype=torch.long, device=next(model.parameters()).device)
    seen = _Recorder(top_k)
    result = beam_search(model, src, beam_size, max_len=max_len, length_penalty=length_penalty, use_cache=use_cache,
                         watch=seen, rules=rules)[0]
    best_ids = result.hypotheses[0][0]
    best = next(n for n in result.nodes if n.status == "finished" and result.path(n.id) == best_ids)
    chain = [best]
    while chain[-1].parent is not None and chain[-1].parent != 0:
        chain.append(result.nodes[chain[-1].parent])
    chain.reverse()  # node t+1 was chosen at step t+1 from row `slot` of that step
    vocab = model.config.tgt_vocab_size
    out = Decoded(list(best_ids))
    for node in chain:
        stats, row = seen.steps[node.step - 1], node.slot
        out.steps.append(RawStep(node.token_id, stats.candidates[row * vocab + node.token_id],
                                 stats.top_ids[row].tolist(), stats.top_probs[row].tolist(), float(stats.entropy[row])))
    out.encoder = seen.encoder
    for kind in ("decoder", "cross"):
        rows = [seen.steps[node.step - 1].attention[kind][:, node.slot] for node in chain]
        setattr(out, kind, join_steps(rows, last_query=True))
    return result, out
