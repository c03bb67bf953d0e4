"""Beam search over a batch of sources, with the KV cache and, for one source, its search tree."""
from __future__ import annotations

import torch
from torch import Tensor

from attnscope.engine.decoding.beam_result import BeamNode, BeamResult
from attnscope.engine.decoding.decode import default_max_len
from attnscope.engine.recording.tracer import model_lock
from attnscope.model.config import BOS_ID, EOS_ID
from attnscope.model.tokenization import strip_specials
from attnscope.model.transformer import DecoderCache, Transformer


def normalised(log_prob: float, length: int, alpha: float) -> float:
    return log_prob / (max(length, 1) ** alpha)


@torch.no_grad()
def beam_search(model: Transformer, src: Tensor, beam_size: int, *, max_len: int | None = None,
                length_penalty: float = 1.0, use_cache: bool = True) -> list[BeamResult]:
    """Beam search for padded sources (B, S); hypotheses are scored by log-prob / length^alpha."""
    b, k = src.shape[0], beam_size
    max_len = max_len or default_max_len(model, src.shape[1])
    with model_lock(model):
        memory, src_mask = model.encode(src)
        memory = memory.repeat_interleave(k, 0)  # (B*k, S, D)
        src_mask = None if src_mask is None else src_mask.repeat_interleave(k, 0)
        cache = DecoderCache.empty(len(model.decoder)) if use_cache else None
        tokens = torch.full((b * k, 1), BOS_ID, dtype=torch.long, device=src.device)
        scores = torch.full((b, k), float("-inf"), device=src.device)
        scores[:, 0] = 0.0  # at first only one live hypothesis per source
        results = [BeamResult([], [BeamNode(0, None, 0, BOS_ID, 0.0, "extended")]) for _ in range(b)]
        node_of = [[0] * k for _ in range(b)]  # beam slot -> tree node
        done = [False] * b
        for step in range(1, max_len + 1):
            feed = tokens[:, -1:] if use_cache else tokens
            logits = model.next_logits(feed, memory, src_mask, cache).float()
            cand = (scores.view(-1, 1) + logits.log_softmax(-1)).view(b, -1)  # (B, k*V)
            top_scores, top_idx = cand.topk(2 * k, dim=1)
            parents, next_tokens, next_scores = [], [], []
            for i in range(b):
                chosen = DEAD_BEAM * k if done[i] else _advance(
                    results[i], node_of[i], top_scores[i].tolist(), top_idx[i].tolist(), logits.shape[-1],
                    k, step, length_penalty, step == max_len)
                for parent, token, score in chosen:
                    parents.append(i * k + parent)
                    next_tokens.append(token)
                    next_scores.append(score)
                done[i] = done[i] or len(results[i].hypotheses) >= k
            if all(done):
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


DEAD_BEAM = [(0, EOS_ID, float("-inf"))]  # fills the beam of a source that has finished


def _advance(result: BeamResult, node_of: list[int], top_scores: list[float], top_idx: list[int], vocab: int,
             k: int, step: int, alpha: float, last: bool) -> list[tuple[int, int, float]]:
    """Sort the 2k best candidates of one source into finished hypotheses and the next beam of k."""
    chosen: list[tuple[int, int, float]] = []
    new_nodes: list[int] = []
    for rank, (score, idx) in enumerate(zip(top_scores, top_idx)):
        if score == float("-inf"):
            break
        parent, token = divmod(idx, vocab)
        if token == EOS_ID or last:
            if rank < k and len(result.hypotheses) < k:
                node = _add_node(result, node_of[parent], step, token, score, "finished", alpha)
                result.hypotheses.append((result.path(node.id), node.score, score))
        elif len(chosen) < k:
            chosen.append((parent, token, score))
            new_nodes.append(_add_node(result, node_of[parent], step, token, score, "alive", alpha).id)
    while len(chosen) < k:
        chosen.extend(DEAD_BEAM)
        new_nodes.append(0)
    node_of[:] = new_nodes
    return chosen


def _add_node(result: BeamResult, parent: int, step: int, token: int, score: float, status: str,
              alpha: float) -> BeamNode:
    node = BeamNode(len(result.nodes), parent, step, token, score, status,
                    normalised(score, step, alpha) if status == "finished" else None)
    result.nodes.append(node)
    return node


def _mark_pruned(result: BeamResult) -> None:
    """Live nodes that no later node extends were pruned from the beam."""
    has_child = {n.parent for n in result.nodes if n.parent is not None}
    for node in result.nodes:
        if node.status == "alive":
            node.status = "extended" if node.id in has_child else "pruned"


def beam_search_batch(model: Transformer, src: Tensor, beam_size: int, max_len: int | None = None) -> list[list[int]]:
    """Best hypothesis per source, as ids without specials (for translate_batch and BLEU)."""
    return [strip_specials(r.hypotheses[0][0]) if r.hypotheses else []
            for r in beam_search(model, src, beam_size, max_len=max_len)]
