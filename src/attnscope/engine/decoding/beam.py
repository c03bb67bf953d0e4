"""Beam search over a batch of sources, with the KV cache and each source's search tree, step by step or at once
(every head's attention of a hypothesis, recorded while it searches, is beam_record.py's)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol

import torch
from torch import Tensor

from attnscope.checkpoints.decoding_rules import ATTNSCOPE, DecodingRules
from attnscope.engine.decoding.beam_result import BeamNode, BeamResult
from attnscope.engine.decoding.rules import constrain, done, history, keep, limit, triage
from attnscope.engine.recording.sharing import eval_mode
from attnscope.model.tokenization import strip_specials
from attnscope.model.transformer import DecoderCache, DecoderOutput, EncoderOutput, Transformer


class Watcher(Protocol):
    """What a caller sees of a beam search while it runs (beam_record.py records hypotheses from it)."""

    def encoded(self, source: EncoderOutput) -> None:
        """The encoder's output, with every layer's weights."""

    def stepped(self, log_probs: Tensor, top_idx: Tensor, step: DecoderOutput) -> None:
        """One step: next-token log-probabilities (B*k, V), the flat indices (B, 2k) of the candidates it ranked,
        and the decoder's output with every head's weights, before the beam moves on."""


def normalised(log_prob: float, length: int, alpha: float) -> float:
    """attnscope's own score of a finished hypothesis: log-prob / length^alpha."""
    return log_prob / ATTNSCOPE.with_penalty(alpha).divisor(length)


@dataclass
class BeamRun:
    """A beam search as far as it has gone (`beam_steps`): each source's tree and finished hypotheses so far, and the
    tree node each beam row holds."""

    results: list[BeamResult]
    node_of: list[list[int]]  # per source: beam slot -> tree node (0, the root, for a dead row)
    rules: DecodingRules
    step: int = 0  # steps run (0: the source is encoded)
    finished: bool = False  # every source's search is over

    def alive(self, source: int = 0) -> list[BeamNode]:
        """The hypotheses of `source` in the beam after the latest step (those it extends next, if it goes on)."""
        nodes = self.results[source].nodes
        return [nodes[i] for i in self.node_of[source] if nodes[i].status == "alive"]

    def settle(self, stopped: bool = False) -> list[BeamResult]:
        """The results as beam_search returns them: hypotheses best first, nodes no later node extends marked pruned.
        `stopped` (a search ended before its end): the hypotheses still in the beam are kept as "stopped" ones, scored
        as a finished one of their length is, among the hypotheses. Call once: it marks the tree."""
        for i, result in enumerate(self.results):
            for node in self.alive(i) if stopped else ():
                node.status, node.score = "stopped", node.log_prob / self.rules.divisor(node.step)
                result.hypotheses.append((result.path(node.id), node.score, node.log_prob))
            result.hypotheses.sort(key=lambda h: -h[1])
            _mark_pruned(result)
        return self.results


@torch.no_grad()
def beam_steps(model: Transformer, src: Tensor, beam_size: int, *, max_len: int | None = None,
               length_penalty: float | None = None, use_cache: bool = True, watch: Watcher | None = None,
               rules: DecodingRules = ATTNSCOPE) -> Iterator[BeamRun]:
    """`beam_search`, one step at a time: yields its run once the sources are encoded, then after every step (the
    same object, grown by that step). Closing the generator stops the search; the run keeps what it found."""
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
        run = BeamRun([BeamResult([], [BeamNode(0, None, 0, bos, 0.0, "extended")]) for _ in range(b)],
                      [[0] * k for _ in range(b)], rules)
        finished = [False] * b
        yield run
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
                    run.results[i], run.node_of[i], top_scores[i].tolist(), top_idx[i].tolist(), log_probs.shape[-1],
                    k, step, rules, max_len, eos)
                for parent, token, score in chosen:
                    parents.append(i * k + parent)
                    next_tokens.append(token)
                    next_scores.append(score)
                finished[i] = over
            run.step, run.finished = step, all(finished)
            if not run.finished:
                order = torch.tensor(parents, device=src.device)
                tokens = torch.cat([tokens[order], torch.tensor(next_tokens, device=src.device).unsqueeze(1)], 1)
                scores = torch.tensor(next_scores, device=src.device).view(b, k)
                if cache is not None:
                    cache.reorder(order)
            yield run
            if run.finished:
                return


def beam_search(model: Transformer, src: Tensor, beam_size: int, *, max_len: int | None = None,
                length_penalty: float | None = None, use_cache: bool = True, watch: Watcher | None = None,
                rules: DecodingRules = ATTNSCOPE) -> list[BeamResult]:
    """Beam search for padded sources (B, S) under `rules` (rules.py: each step's bans, the scores of finished
    hypotheses, log-prob / penalty(length), with alpha `length_penalty` if given, and when a search ends). A
    `watch`er sees the search as it runs, every head's weights included."""
    *_, run = beam_steps(model, src, beam_size, max_len=max_len, length_penalty=length_penalty, use_cache=use_cache,
                         watch=watch, rules=rules)  # every yield is the one run, grown
    return run.settle()


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
